package change

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// MaxMembers is how many Stacks one stage deploys at most, named and
// selected together: a Promotion records each Stack it pins in its
// status (status.stacks), which holds that many within the API server's
// size limit (its previews are StackPromotions of their own). A stage
// whose spec comes to more is Stalled, naming the count.
const MaxMembers = 1000

// MaxPullRequestStacks is how many Stacks of a stage a pull request is
// previewed against: a Pipeline records each preview of each open pull
// request in its status. A stage that deploys more is not previewed for
// pull requests, and the pull request's comment says so.
const MaxPullRequestStacks = 16

// Membership is which Stacks a stage deploys, worked out from its spec
// and the Stacks of its namespace. Every controller that acts on a
// stage's Stacks, and the dashboard, take it from Members, so that a
// Stack named and a Stack selected are one and the same to them.
//
// A label is anyone's to write who may edit the Stack, so a selector
// only narrows, and cannot narrow unseen: a Stack the selector matches
// is a member only if it consents to the stage explicitly (selectedConsent:
// its promotion.stackyard.dev/authorized-stage annotation, which needs
// govern, names the stage, or, for a preview-only stage, its
// preview-stages annotation does), and one that does not is left alone
// and listed in Unconsented. A Stack bound to a selecting stage by its
// annotation that the stage does not select (its label removed, say) is
// listed in Unselected: the stage would claim a release it never
// deployed there, so the stage stalls and its promotions are refused
// until it is selected again or its binding removed. A Stack the spec
// names is a member whatever it says: a named Stack that does not
// consent is a mistake of the stage's, which the stage and its
// promotions report.
type Membership struct {
	// Bindings are the member Stacks: those spec.stacks names, in its
	// order, then those spec.stackSelector matches that consent, by name.
	Bindings []promotionv1alpha1.StackBinding
	// Unconsented are the Stacks spec.stackSelector matches that do not
	// consent to the stage, by name.
	Unconsented []string
	// Unselected are the Stacks bound to a selecting stage (their
	// authorized-stage annotation names it) that it neither names nor
	// selects, by name. Always empty for a stage without a selector.
	Unselected []string
}

// Problem says why a stage cannot be promoted into with this membership,
// naming the fields, or "" when it can: it deploys no Stack (a promotion
// would verify a release nowhere), or Stacks bound to it are not
// selected.
func (m Membership) Problem(stage string) string {
	switch {
	case len(m.Unselected) > 0:
		return fmt.Sprintf("spec.stackSelector: Stacks %s are bound to stage %s (%s) but the selector does not match their labels; "+
			"label them, or have a governor remove the binding", strings.Join(m.Unselected, ", "), stage, promotionv1alpha1.AuthorizedStageAnnotation)
	case len(m.Bindings) == 0:
		return fmt.Sprintf("spec.stacks and spec.stackSelector: stage %s deploys no Stack (none is named, and none that the selector matches consents)", stage)
	}
	return ""
}

// selectedConsent reports whether a Stack that stage does not name but
// selects consents to it: explicitly, by an annotation only a governor
// writes. An ungoverned Stack, which any preview-only stage that names
// it may preview, is not a member by its labels alone.
func selectedConsent(stage *promotionv1alpha1.Stage, stack *pulumiv1.Stack) bool {
	governor := AuthorizedStage(stack.Annotations)
	if governor == "" {
		return false
	}
	return Unconsented(stage.Name, stage.Spec.PreviewOnly, stack.Name, stack.Annotations) == ""
}

// StackSelector is the stage's spec.stackSelector as a labels.Selector:
// nil when the stage has none, an error naming the field when it is not a
// valid selector. An empty selector matches every Stack of the namespace.
func StackSelector(stage *promotionv1alpha1.Stage) (labels.Selector, error) {
	if stage.Spec.StackSelector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(stage.Spec.StackSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.stackSelector: %w", err)
	}
	return sel, nil
}

// Members works out stage's membership from stacks, the Stacks of its
// namespace (any order; those of other namespaces are ignored). It fails
// only on an invalid selector.
func Members(stage *promotionv1alpha1.Stage, stacks []pulumiv1.Stack) (Membership, error) {
	m := Membership{Bindings: slices.Clone(stage.Spec.Stacks)}
	sel, err := StackSelector(stage)
	if err != nil || sel == nil {
		return m, err
	}
	named := map[string]bool{}
	for _, b := range stage.Spec.Stacks {
		named[b.Name] = true
	}
	var selected []pulumiv1.Stack
	for _, st := range stacks {
		if st.Namespace != stage.Namespace || named[st.Name] {
			continue
		}
		switch {
		case sel.Matches(labels.Set(st.Labels)):
			selected = append(selected, st)
		case AuthorizedStage(st.Annotations) == stage.Name:
			m.Unselected = append(m.Unselected, st.Name)
		}
	}
	slices.Sort(m.Unselected)
	slices.SortFunc(selected, func(a, b pulumiv1.Stack) int { return strings.Compare(a.Name, b.Name) })
	for i := range selected {
		st := &selected[i]
		if !selectedConsent(stage, st) {
			m.Unconsented = append(m.Unconsented, st.Name)
			continue
		}
		m.Bindings = append(m.Bindings, promotionv1alpha1.StackBinding{Name: st.Name})
	}
	return m, nil
}

// ListMembers lists, with r, the Stacks of stage's namespace (all of them
// when it selects: those bound to it that it does not select count too),
// and returns Members of them.
func ListMembers(ctx context.Context, r client.Reader, stage *promotionv1alpha1.Stage) (Membership, error) {
	sel, err := StackSelector(stage)
	if err != nil || sel == nil {
		return Members(stage, nil)
	}
	var list pulumiv1.StackList
	if err := r.List(ctx, &list, client.InNamespace(stage.Namespace)); err != nil {
		return Membership{}, fmt.Errorf("listing the Stacks of namespace %s for stage %s: %w", stage.Namespace, stage.Name, err)
	}
	return Members(stage, list.Items)
}

// Includes reports whether stage deploys stack: the spec names it, or
// its selector matches it and it consents. It is Members for one Stack.
func Includes(stage *promotionv1alpha1.Stage, stack *pulumiv1.Stack) bool {
	if stack.Namespace != stage.Namespace {
		return false
	}
	if slices.ContainsFunc(stage.Spec.Stacks, func(b promotionv1alpha1.StackBinding) bool { return b.Name == stack.Name }) {
		return true
	}
	sel, err := StackSelector(stage)
	if err != nil || sel == nil || !sel.Matches(labels.Set(stack.Labels)) {
		return false
	}
	return selectedConsent(stage, stack)
}
