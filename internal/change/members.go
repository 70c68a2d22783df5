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
// selected together: a Promotion records each Stack it previews and pins
// in its status, which holds that many. A stage whose spec comes to more
// is Stalled, naming the count.
const MaxMembers = 16

// Membership is which Stacks a stage deploys, worked out from its spec
// and the Stacks of its namespace. Every controller that acts on a
// stage's Stacks, and the dashboard, take it from Members, so that a
// Stack named and a Stack selected are one and the same to them.
//
// A label is anyone's to write who may edit the Stack, so a selector
// only narrows: a Stack the selector matches is deployed only if it
// consents to the stage (promotion.stackyard.dev/authorized-stage, which
// needs govern on the stage), and one that does not is left alone and
// listed in Unconsented. A Stack the spec names is a member whatever it
// says: a named Stack that does not consent is a mistake of the stage's,
// which the stage and its promotions report.
type Membership struct {
	// Bindings are the member Stacks: those spec.stacks names, in its
	// order, then those spec.stackSelector matches that consent, by name.
	Bindings []promotionv1alpha1.StackBinding
	// Unconsented are the Stacks spec.stackSelector matches that do not
	// consent to the stage, by name.
	Unconsented []string
}

// Names are the names of the member Stacks, in order.
func (m Membership) Names() []string {
	out := make([]string, len(m.Bindings))
	for i, b := range m.Bindings {
		out[i] = b.Name
	}
	return out
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
// namespace its selector matches (any order; others are ignored). It
// fails only on an invalid selector.
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
		if st.Namespace == stage.Namespace && !named[st.Name] && sel.Matches(labels.Set(st.Labels)) {
			selected = append(selected, st)
		}
	}
	slices.SortFunc(selected, func(a, b pulumiv1.Stack) int { return strings.Compare(a.Name, b.Name) })
	for _, st := range selected {
		if Unconsented(stage.Name, stage.Spec.PreviewOnly, st.Name, st.Annotations) != "" {
			m.Unconsented = append(m.Unconsented, st.Name)
			continue
		}
		m.Bindings = append(m.Bindings, promotionv1alpha1.StackBinding{Name: st.Name})
	}
	return m, nil
}

// ListMembers lists, with r, the Stacks of stage's namespace its selector
// matches, and returns Members of them.
func ListMembers(ctx context.Context, r client.Reader, stage *promotionv1alpha1.Stage) (Membership, error) {
	sel, err := StackSelector(stage)
	if err != nil || sel == nil {
		return Members(stage, nil)
	}
	var list pulumiv1.StackList
	if err := r.List(ctx, &list, client.InNamespace(stage.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return Membership{}, fmt.Errorf("listing the Stacks spec.stackSelector of stage %s matches: %w", stage.Name, err)
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
	return Unconsented(stage.Name, stage.Spec.PreviewOnly, stack.Name, stack.Annotations) == ""
}
