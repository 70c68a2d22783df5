package pipelinectl

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// ReviewKind is the kind of the document `stackyard review -o json|yaml`
// prints.
const ReviewKind = "PromotionReview"

// Review is everything an approver decides on, for one promotion: what
// each Stack's preview would change, value by value (secrets masked), the
// code the release brings, and the policy rules that fired. The CLI
// (`stackyard review`, `stackyard approve`) and the dashboard's promotion
// page show the same Review.
type Review struct {
	// APIVersion is OutputAPIVersion; Kind is ReviewKind.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace and Promotion name the promotion.
	Namespace string `json:"namespace"`
	Promotion string `json:"promotion"`
	// Stage, Release and Commit are what it promotes where.
	Stage   string `json:"stage"`
	Release string `json:"release"`
	Commit  string `json:"commit,omitempty"`
	// Rollback marks a rollback.
	Rollback bool `json:"rollback,omitempty"`
	// Phase and Message are the promotion's.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// RequestedBy is who asked.
	RequestedBy string `json:"requestedBy,omitempty"`
	// PlanDigest is what an approval is given for.
	PlanDigest string `json:"planDigest,omitempty"`
	// Policies are the stage's rules that fired.
	Policies []promotionv1alpha1.PolicyResult `json:"policies,omitempty"`
	// Approvals are the decisions that count.
	Approvals []promotionv1alpha1.ApprovalRecord `json:"approvals,omitempty"`
	// HeldChange is, for the promotion of a change held on a Stack, what
	// changed in its spec and who changed it.
	HeldChange *HeldChangeReview `json:"heldChange,omitempty"`
	// Stacks are the previews, Stack by Stack.
	Stacks []StackReview `json:"stacks"`
	// StacksNote says why Stacks is empty although the promotion
	// previewed some: the reader may not list its StackPromotions.
	StacksNote string `json:"stacksNote,omitempty"`
	// Rollout is the promotion's progress through the stage's waves,
	// once it started (status.rollout), and Waves each Stack's wave and
	// state.
	Rollout *promotionv1alpha1.RolloutStatus  `json:"rollout,omitempty"`
	Waves   []promotionv1alpha1.PromotedStack `json:"waves,omitempty"`
}

// HeldChangeReview is the change to a Stack's spec that a promotion of a
// held change deploys: its fields against the approved spec (secret
// values given inline as digests) and its author.
type HeldChangeReview struct {
	// Stack is the Stack that holds the change; Generation its held
	// generation.
	Stack      string `json:"stack"`
	Generation int64  `json:"generation,omitempty"`
	// EditedBy is who made it, as the operator's admission webhook
	// recorded it; empty when unknown.
	EditedBy string `json:"editedBy,omitempty"`
	// Changes are the fields that differ from the approved spec.
	Changes []shared.SpecChange `json:"changes,omitempty"`
	// Truncated says Changes lists only the first ones.
	Truncated bool `json:"truncated,omitempty"`
	// Note says why the changes are not shown, when they are not.
	Note string `json:"note,omitempty"`
}

// AddHeldChange fills r.HeldChange from stack, the Stack that holds the
// change p promotes; stack is nil when it could not be read, and
// unreadable then says why (empty: not said). It does nothing for a
// promotion of a release.
func (r *Review) AddHeldChange(p *promotionv1alpha1.Promotion, stack *pulumiv1.Stack, unreadable string) {
	ref := p.Spec.HeldChange
	if ref == nil {
		return
	}
	h := &HeldChangeReview{Stack: ref.Stack}
	switch {
	case stack == nil:
		h.Note = cmp.Or(unreadable, "Stack "+ref.Stack+" could not be read")
	case stack.Status.HeldSpec == nil || stack.Status.HeldSpec.Digest != ref.Digest:
		h.Note = "Stack " + ref.Stack + " no longer holds this change: it was deployed, superseded or withdrawn"
	default:
		held := stack.Status.HeldSpec
		h.Generation, h.EditedBy, h.Changes, h.Truncated = held.Generation, held.EditedBy, held.Changes, held.ChangesTruncated
		if len(held.Changes) == 0 {
			h.Note = "no field-by-field difference is kept (no snapshot of the approved spec)"
		}
	}
	r.HeldChange = h
}

// StackReview is what a promotion would change on one Stack.
type StackReview struct {
	// Name is the Stack's name.
	Name string `json:"name"`
	// Summary counts the changes; unset until the preview succeeded.
	Summary *promotionv1alpha1.ChangeSummary `json:"summary,omitempty"`
	// Message says how the preview ended.
	Message string `json:"message,omitempty"`
	// Resources are the resources that would change, with their value
	// diffs where the reader may see them.
	Resources []ResourceReview `json:"resources,omitempty"`
	// ValuesNote says why the values are not shown, when they are not.
	ValuesNote string `json:"valuesNote,omitempty"`
	// Source is the code the release brings to the Stack.
	Source *promotionv1alpha1.SourceChange `json:"source,omitempty"`
	// Patch is the unified diff of that code, when asked for.
	Patch string `json:"patch,omitempty"`
}

// ResourceReview is one resource that would change.
type ResourceReview struct {
	// URN, Type and Op are the resource and the step.
	URN  string `json:"urn"`
	Type string `json:"type,omitempty"`
	Op   string `json:"op"`
	// Changed names the changed top-level properties.
	Changed []string `json:"changed,omitempty"`
	// Properties are the changed values, leaf by leaf.
	Properties []valuediff.Property `json:"properties,omitempty"`
	// Truncated says that more properties changed than are listed.
	Truncated bool `json:"truncated,omitempty"`
}

// PlanData is the data of a promotion's plan Secrets, by Secret name; a
// Secret that could not be read is missing, with why in Unreadable.
type PlanData struct {
	// Secrets maps a plan Secret's name to its data.
	Secrets map[string]map[string][]byte
	// Unreadable says why the plan Secrets could not be read.
	Unreadable string
}

// BuildReview assembles the Review of p from its status, its previews
// (its StackPromotions', change.Previews) and the data of its plan
// Secrets (the value diffs and the code's patch); withPatch keeps the
// patch.
func BuildReview(p *promotionv1alpha1.Promotion, previews []promotionv1alpha1.StackPreview, plans PlanData, withPatch bool) Review {
	st := &p.Status
	r := Review{
		APIVersion: OutputAPIVersion, Kind: ReviewKind,
		Namespace: p.Namespace, Promotion: p.Name, Stage: p.Spec.Stage, Release: p.Spec.Release, Commit: st.Commit,
		Rollback: p.Spec.Rollback, Phase: string(st.Phase), Message: st.Message, RequestedBy: p.Spec.RequestedBy,
		PlanDigest: st.PlanDigest, Approvals: st.Approvals,
	}
	for _, pr := range st.Policies {
		if pr.Fired {
			r.Policies = append(r.Policies, pr)
		}
	}
	if st.Rollout != nil && st.Rollout.Spec != nil {
		r.Rollout, r.Waves = st.Rollout, st.Stacks
	}
	for _, pv := range previews {
		sr := StackReview{Name: pv.Name, Summary: pv.Summary, Message: pv.Message, Source: pv.Source}
		data, ok := plans.Secrets[pv.Plan]
		var diff valuediff.Diff
		switch {
		case pv.Plan == "":
		case !ok:
			sr.ValuesNote = "values not shown: " + cmp.Or(plans.Unreadable, "the plan Secret "+pv.Plan+" is gone")
		case len(data[autov1alpha1.DiffKey]) == 0:
			sr.ValuesNote = "values not shown: the preview recorded none"
		default:
			var err error
			if diff, err = valuediff.Decode(data[autov1alpha1.DiffKey]); err != nil {
				sr.ValuesNote = "values not shown: " + err.Error()
			}
		}
		if withPatch && ok {
			sr.Patch = string(data[promotionv1alpha1.SourcePatchKey])
		}
		for _, rc := range pv.Changes {
			rr := ResourceReview{URN: rc.URN, Type: rc.Type, Op: rc.Op, Changed: rc.Properties}
			if d, found := diff.ForURN(rc.URN, rc.Op); found {
				rr.Properties, rr.Truncated = d.Properties, d.Truncated
				if rr.Type == "" {
					rr.Type = d.Type
				}
			}
			sr.Resources = append(sr.Resources, rr)
		}
		r.Stacks = append(r.Stacks, sr)
	}
	return r
}

// Review reads promotion and the plan Secrets it names, with the client's
// rights, and builds its Review. Without the right to read Secrets in the
// namespace, the Review has no values and says so.
func (c *Client) Review(ctx context.Context, promotion string, withPatch bool) (Review, error) {
	p := &promotionv1alpha1.Promotion{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: promotion}, p); err != nil {
		return Review{}, fmt.Errorf("promotion %q: %w", promotion, err)
	}
	var held *pulumiv1.Stack
	unreadable := ""
	if ref := p.Spec.HeldChange; ref != nil {
		held = &pulumiv1.Stack{}
		switch err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ref.Stack}, held); {
		case apierrors.IsForbidden(err):
			held, unreadable = nil, "you may not read Stacks in namespace "+c.Namespace
		case err != nil:
			held = nil
		}
	}
	recs, err := change.StackRecords(ctx, c.Client, p)
	stacksNote := ""
	switch {
	case apierrors.IsForbidden(err):
		stacksNote = "previews not shown: you may not list StackPromotions in namespace " + c.Namespace
	case err != nil:
		return Review{}, err
	}
	previews := change.Previews(p, recs)
	plans := PlanData{Secrets: map[string]map[string][]byte{}}
	for _, pv := range previews {
		if pv.Plan == "" {
			continue
		}
		var s corev1.Secret
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pv.Plan}, &s)
		switch {
		case apierrors.IsForbidden(err):
			plans.Unreadable = "you may not read Secrets in namespace " + c.Namespace + " (the dashboard shows them to those who may list its Stacks)"
		case err == nil:
			plans.Secrets[pv.Plan] = s.Data
		case !apierrors.IsNotFound(err):
			return Review{}, fmt.Errorf("reading the plan Secret %s: %w", pv.Plan, err)
		}
	}
	r := BuildReview(p, previews, plans, withPatch)
	r.StacksNote = stacksNote
	r.AddHeldChange(p, held, unreadable)
	return r, nil
}

// Fleet sums up the previews of the review's Stacks, grouped by what
// they change (change.DescribeFleet), when there is more than one; "" for
// one Stack or none.
func (r Review) Fleet() string {
	if len(r.Stacks) < 2 {
		return ""
	}
	summaries := make([]*promotionv1alpha1.ChangeSummary, len(r.Stacks))
	for i := range r.Stacks {
		summaries[i] = r.Stacks[i].Summary
	}
	return change.DescribeFleet(summaries)
}

// WriteReview prints r as text: per Stack, the counts, each resource with
// its op sign (+ create, ~ update, +- replace, - delete) and its changed
// values as old => new, the commits and files the release brings, and,
// when r holds it, the patch. Nothing relies on colour.
func WriteReview(w io.Writer, r Review) error {
	b := &strings.Builder{}
	what := "promotion"
	if r.Rollback {
		what = "rollback"
	}
	fmt.Fprintf(b, "%s %s: release %s (%s) into stage %s, %s\n", what, r.Promotion, r.Release, shortSHA(r.Commit), r.Stage, r.Phase)
	if r.RequestedBy != "" {
		fmt.Fprintf(b, "requested by %s\n", r.RequestedBy)
	}
	if r.Message != "" {
		fmt.Fprintf(b, "%s\n", r.Message)
	}
	for _, pr := range r.Policies {
		fmt.Fprintf(b, "policy %s fired (%s): %s\n", pr.Name, pr.Action, pr.Message)
	}
	if h := r.HeldChange; h != nil {
		writeHeldChange(b, h)
	}
	if fleet := r.Fleet(); fleet != "" {
		fmt.Fprintf(b, "in all, %s\n", fleet)
	}
	writeRollout(b, r)
	if r.StacksNote != "" {
		fmt.Fprintf(b, "%s\n", r.StacksNote)
	}
	for _, s := range r.Stacks {
		fmt.Fprintf(b, "\nStack %s: %s\n", s.Name, describeCounts(s.Summary))
		if s.Message != "" && s.Summary == nil {
			fmt.Fprintf(b, "  %s\n", s.Message)
		}
		for _, res := range s.Resources {
			fmt.Fprintf(b, "  %s %s %s\n", valuediff.OpSign(res.Op), res.Op, res.URN)
			if len(res.Properties) == 0 && len(res.Changed) > 0 {
				fmt.Fprintf(b, "      changed: %s\n", strings.Join(res.Changed, ", "))
			}
			for _, p := range res.Properties {
				fmt.Fprintf(b, "      %s %s: %s\n", valuediff.KindSign(p.Kind), p.Path, p.Describe())
			}
			if res.Truncated {
				fmt.Fprintf(b, "      … more properties changed\n")
			}
		}
		if s.ValuesNote != "" {
			fmt.Fprintf(b, "  (%s)\n", s.ValuesNote)
		}
		writeSource(b, s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSource prints the commits, files and patch of s.
func writeSource(b *strings.Builder, s StackReview) {
	src := s.Source
	if src == nil {
		return
	}
	if src.Message != "" {
		fmt.Fprintf(b, "  code: %s\n", src.Message)
		return
	}
	if src.From == src.To {
		fmt.Fprintf(b, "  code: the Stack runs %s already\n", shortSHA(src.To))
		return
	}
	verb := "brings"
	if src.Reverse {
		verb = "takes back out"
	}
	fmt.Fprintf(b, "  code %s..%s %s %d commit(s):\n", shortSHA(src.From), shortSHA(src.To), verb, src.CommitCount)
	for _, c := range src.Commits {
		when := ""
		if c.Time != nil {
			when = c.Time.UTC().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(b, "    %s %s (%s, %s)\n", shortSHA(c.SHA), c.Subject, c.Author, when)
	}
	if int(src.CommitCount) > len(src.Commits) {
		fmt.Fprintf(b, "    … and %d more\n", int(src.CommitCount)-len(src.Commits))
	}
	fmt.Fprintf(b, "  files changed under the Stack's directory: %d\n", src.PathCount)
	for _, p := range src.Paths {
		fmt.Fprintf(b, "    %s\n", p)
	}
	if s.Patch != "" {
		b.WriteString("\n")
		b.WriteString(s.Patch)
		if !strings.HasSuffix(s.Patch, "\n") {
			b.WriteString("\n")
		}
	}
}

// writeHeldChange prints what a held change changes in its Stack's spec.
func writeHeldChange(b *strings.Builder, h *HeldChangeReview) {
	by := "by someone nobody recorded"
	if h.EditedBy != "" {
		by = "by " + h.EditedBy
	}
	fmt.Fprintf(b, "\nheld change of Stack %s", h.Stack)
	if h.Generation != 0 {
		fmt.Fprintf(b, " (generation %d), made %s", h.Generation, by)
	}
	b.WriteString(":\n")
	if h.Note != "" {
		fmt.Fprintf(b, "  (%s)\n", h.Note)
	}
	for _, c := range h.Changes {
		switch c.Op {
		case shared.SpecChangeAdded:
			fmt.Fprintf(b, "  + %s: %s\n", c.Path, c.New)
		case shared.SpecChangeRemoved:
			fmt.Fprintf(b, "  - %s: %s\n", c.Path, c.Old)
		default:
			fmt.Fprintf(b, "  ~ %s: %s => %s\n", c.Path, c.Old, c.New)
		}
	}
	if h.Truncated {
		b.WriteString("  … more fields changed\n")
	}
}

// describeCounts renders a preview's counts.
func describeCounts(s *promotionv1alpha1.ChangeSummary) string {
	if s == nil {
		return "not previewed"
	}
	return fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete, %d unchanged", s.Create, s.Update, s.Replace, s.Delete, s.Same)
}

// shortSHA is change.ShortCommit(sha), or "-" for none.
func shortSHA(sha string) string { return cmp.Or(change.ShortCommit(sha), "-") }

// RolloutWave is one wave of a promotion's rollout: its Stacks, in the
// rollout's order, and how many are in each state.
type RolloutWave struct {
	// Number is the wave's number, from 1.
	Number int32
	// Counts are how many of the wave's Stacks are in each state.
	Counts promotionv1alpha1.RolloutCounts
	// Stacks are the wave's Stacks, in the rollout's order.
	Stacks []promotionv1alpha1.PromotedStack
}

// RolloutWaves groups a promotion's Stacks (status.stacks) by the waves
// of its rollout (status.rollout); nil without one.
func RolloutWaves(ro *promotionv1alpha1.RolloutStatus, stacks []promotionv1alpha1.PromotedStack) []RolloutWave {
	if ro == nil {
		return nil
	}
	waves := make([]RolloutWave, 0, ro.Waves)
	for n := int32(1); n <= ro.Waves; n++ {
		w := RolloutWave{Number: n}
		for _, ps := range stacks {
			if max(ps.Wave, 1) == n {
				w.Stacks = append(w.Stacks, ps)
				w.Counts.Add(ps.State)
			}
		}
		waves = append(waves, w)
	}
	return waves
}

// writeRollout prints a rollout in waves: where it is, why it halted,
// each wave's Stacks with their state, and the run of the stage's checks
// against the wave that has one (verifyEachWave).
func writeRollout(b *strings.Builder, r Review) {
	ro := r.Rollout
	if ro == nil {
		return
	}
	c := ro.Counts
	fmt.Fprintf(b, "rollout: wave %d of %d; %d succeeded, %d failed (budget %d), %d updating, %d pending, %d skipped\n",
		ro.Wave, ro.Waves, c.Succeeded, c.Failed, ro.FailureBudget, c.Updating, c.Pending, c.Skipped)
	if ro.Halted != "" {
		fmt.Fprintf(b, "  halted: %s\n", ro.Halted)
	}
	for _, w := range RolloutWaves(ro, r.Waves) {
		stacks := make([]string, 0, len(w.Stacks))
		for _, ps := range w.Stacks {
			stacks = append(stacks, fmt.Sprintf("%s %s", ps.Name, ps.State))
		}
		fmt.Fprintf(b, "  wave %d: %s\n", w.Number, strings.Join(stacks, ", "))
		if v := ro.Verification; v != nil && v.Wave == w.Number {
			attempt := ""
			if v.Attempt > 1 {
				attempt = fmt.Sprintf(" (attempt %d)", v.Attempt)
			}
			fmt.Fprintf(b, "    checks %s%s%s\n", v.Phase, attempt, orEmpty(": ", v.Message))
		}
	}
	if a := ro.Approval; a != nil {
		if a.ApprovedTime != nil {
			fmt.Fprintf(b, "  wave %d approved at %s\n", a.Wave, a.ApprovedTime.UTC().Format("2006-01-02T15:04:05Z"))
		} else {
			fmt.Fprintf(b, "  wave %d waits for approval since %s\n", a.Wave, a.Since.UTC().Format("2006-01-02T15:04:05Z"))
		}
		for _, rec := range a.Approvals {
			fmt.Fprintf(b, "    %s by %s at %s%s\n", rec.Decision, rec.User, rec.Time.UTC().Format("2006-01-02T15:04:05Z"), orEmpty(": ", rec.Comment))
		}
	}
	for _, in := range ro.Interventions {
		fmt.Fprintf(b, "  %s by %s at %s%s\n", in.Action, in.User, in.Time.UTC().Format("2006-01-02T15:04:05Z"), orEmpty(": ", in.Reason))
	}
}

// orEmpty is prefix+s, or "" when s is empty.
func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
