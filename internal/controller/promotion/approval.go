package promotion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/change/policy"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// The Promotion controller reads the Approvals of the promotions it runs.
// It never writes one: an Approval is a person's record, admitted by the
// API server (config/policy/approval.yaml).
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=approvals,verbs=get;list;watch

// ApprovalPromotionField is the selectable field of an Approval that
// names its Promotion.
const ApprovalPromotionField = "spec.promotion"

// approvalWait is how long a promotion waiting for approvals waits before
// it looks again by itself; a new Approval wakes it sooner, and one that
// expires wakes it when it does.
const approvalWait = time.Hour

// maxApprovalRecords is the API's limit on status.approvals.
const maxApprovalRecords = 64

// reconcileApproval computes the promotion's plan digest and, when its
// stage or a fired RequireApproval policy rule requires approvals
// (approvalRequired), keeps it Pending until enough approvals for that
// digest count, for the stage and for each rule.
// The digest is computed afresh on every reconcile of a Pending promotion,
// so right before startPromotion too: when an input changed since the
// approvals were given, the new digest replaces the old, the approvals no
// longer count and the promotion asks for them again. One eligible
// rejection for the digest fails the promotion before anything changes.
// The decisions that count are recorded in status.approvals.
func (s *session) reconcileApproval(ctx context.Context) (sreconcile.Result, error) {
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	digest, err := s.planDigest(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	st := &s.p.Status
	if st.PlanDigest != digest {
		st.PlanDigest, st.Approvals = digest, nil
	}
	rules := policy.Approvals(st.Policies)
	if !approvalRequired(s.stage, s.p, rules) {
		return sreconcile.ResultEmpty, nil
	}
	approvals, err := s.listApprovals(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	editor, err := s.changeEditor(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	t := tally(s.stage.Spec.Approval, rules, s.p, 0, approvals, s.now, editor)
	st.Approvals = t.records()
	if r := t.rejected; r != nil {
		// The reconcile's clock was read before the live list: the end is
		// never earlier than the rejection that caused it.
		if at := r.CreationTimestamp.Time; at.After(s.now) {
			s.now = at
		}
		s.end(promotionv1alpha1.PromotionFailed, fmt.Sprintf("rejected by %s: %s", r.Spec.User, r.Spec.Comment))
		st.StartTime = nil // it never started
		return sreconcile.ResultSuccess, nil
	}
	if !t.approved() {
		wait := t.recheck(s.now)
		if s.r.Admission != nil {
			// Fail closed while waiting too: the policies that keep an
			// approval true can go after this promotion got past
			// reconcileAdmission, so it looks at them again.
			wait = min(wait, change.HoldRecheck)
		}
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(promotionv1alpha1.PromotionReasonAwaitingApproval, errors.New(t.message()), wait)
	}
	return sreconcile.ResultEmpty, nil
}

// changeEditor is who made the change a promotion of a held change
// deploys; known is false when nobody recorded it.
type changeEditor struct {
	name  string
	known bool
}

// changeEditor is who made the held change the promotion deploys; nil
// for a promotion of a release.
func (s *session) changeEditor(ctx context.Context) (*changeEditor, error) {
	if s.p.Spec.HeldChange == nil {
		return nil, nil
	}
	name, known, err := s.heldChangeEditor(ctx)
	if err != nil {
		return nil, sreconcile.NewGeneric("", fmt.Errorf("reading who made the held change: %w", err))
	}
	return &changeEditor{name: name, known: known}, nil
}

// listApprovals lists the Approvals of the promotion, read live: a
// decision to go on must not miss a rejection the cache has not shown
// yet.
func (s *session) listApprovals(ctx context.Context) ([]promotionv1alpha1.Approval, error) {
	var list promotionv1alpha1.ApprovalList
	if err := s.r.APIReader.List(ctx, &list, client.InNamespace(s.p.Namespace), client.MatchingFields{ApprovalPromotionField: s.p.Name}); err != nil {
		return nil, sreconcile.NewGeneric("", fmt.Errorf("listing the approvals of promotion %s: %w", s.p.Name, err))
	}
	return list.Items, nil
}

// approvalRequired reports whether promotion p into stage must be
// approved before it starts: the stage requires approvals, or one of the
// fired RequireApproval policy rules does, and p is not an automatic
// rollback (asked for by the operator after a failed verification) that
// the stage lets skip them (approval.skipForRollback skips the rules'
// approvals too). A rollback a person asks for is approved like any
// promotion.
func approvalRequired(stage *promotionv1alpha1.Stage, p *promotionv1alpha1.Promotion, rules []promotionv1alpha1.PolicyResult) bool {
	policy := stage.Spec.Approval
	if policy == nil {
		return len(rules) > 0
	}
	automatic := p.Spec.Rollback && p.Spec.RequestedBy == promotionv1alpha1.RequestedByAutoPromotion
	return !(automatic && policy.SkipForRollback)
}

// promotionOfApproval maps an Approval to the Promotion it decides on.
func promotionOfApproval(_ context.Context, obj client.Object) []ctrlreconcile.Request {
	a, ok := obj.(*promotionv1alpha1.Approval)
	if !ok || a.Spec.Promotion == "" {
		return nil
	}
	return []ctrlreconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.Promotion}}}
}

// approvalTally is what the Approvals of one promotion add up to under
// its stage's policy and its fired policy rules.
type approvalTally struct {
	// requirements are the stage's policy (when it has one) and the fired
	// RequireApproval rules, each counted on the same approvals.
	requirements []requirement
	// counted are the approvals that count for at least one requirement,
	// one per user (their newest), oldest first.
	counted []promotionv1alpha1.Approval
	// rejected is the first eligible rejection, which fails the promotion.
	rejected *promotionv1alpha1.Approval
	// stale says that someone decided on an earlier plan digest and has
	// not decided on the current one.
	stale bool
	// ignored says, user by user, why a decision on the current digest
	// does not count.
	ignored []string
	// expireAfter is how long an approval counts; zero: for ever.
	expireAfter time.Duration
}

// requirement is one set of approvals a promotion needs: the stage's
// approval policy, or a fired RequireApproval policy rule.
type requirement struct {
	// rule is the policy rule's name; empty for the stage's policy.
	rule string
	// required, from and requireEach are the policy's or the rule's.
	required    int32
	from        []promotionv1alpha1.Approver
	requireEach bool
	// count is how many counted approvals come from someone in from.
	count int
	// missing are the entries of from no counted approval represents,
	// with requireEach.
	missing []promotionv1alpha1.Approver
}

// requirementsOf lists what policy (nil: the stage has none) and the
// fired RequireApproval rules require, the stage's first.
func requirementsOf(policy *promotionv1alpha1.ApprovalPolicy, rules []promotionv1alpha1.PolicyResult) []requirement {
	var out []requirement
	if policy != nil {
		out = append(out, requirement{required: policy.Required, from: policy.From, requireEach: policy.RequireEach})
	}
	for _, r := range rules {
		out = append(out, requirement{rule: r.Name, required: r.Required, from: r.From, requireEach: r.RequireEach})
	}
	return out
}

// satisfied reports whether the counted approvals meet r.
func (r *requirement) satisfied() bool {
	return r.count >= int(r.required) && len(r.missing) == 0
}

// describe says what r still needs, e.g. "1 of 2 (needs one from group
// security)" for the stage, or "policy db-replace needs 2 of group dba: 1
// so far" for a rule.
func (r *requirement) describe() string {
	var b strings.Builder
	from := make([]string, 0, len(r.from))
	for _, m := range r.from {
		from = append(from, approverString(m))
	}
	if r.rule == "" {
		fmt.Fprintf(&b, "%d of %d", r.count, r.required)
		if len(r.missing) == 0 && len(from) > 0 {
			fmt.Fprintf(&b, " (from %s)", strings.Join(from, " or "))
		}
	} else {
		fmt.Fprintf(&b, "policy %s needs %d", r.rule, r.required)
		if len(from) > 0 {
			fmt.Fprintf(&b, " of %s", strings.Join(from, " or "))
		} else if r.required == 1 {
			b.WriteString(" approval")
		} else {
			b.WriteString(" approvals")
		}
		fmt.Fprintf(&b, ": %d so far", r.count)
	}
	if len(r.missing) > 0 {
		needs := make([]string, 0, len(r.missing))
		for _, m := range r.missing {
			needs = append(needs, "one from "+approverString(m))
		}
		fmt.Fprintf(&b, " (needs %s)", strings.Join(needs, " and "))
	}
	return b.String()
}

// tally applies the stage's approval policy (nil: none) and the fired
// RequireApproval rules to the approvals of promotion p at now: of the
// Pending promotion (wave 0), or of one wave of its rollout that waits
// (rollout.approveEachWave). An approval counts when it names p's stage,
// plan digest and that wave, has
// not expired (creationTimestamp + policy.expireAfter), comes from
// someone eligible for at least one requirement (a user or a member of a
// group its from lists; anyone when from is empty) and, unless
// policy.allowSelfApproval, not from the user who asked for the
// promotion; each user counts once, for every requirement they are
// eligible for. An eligible rejection fails the promotion, whoever gives
// it: the requester may withdraw.
func tally(policy *promotionv1alpha1.ApprovalPolicy, rules []promotionv1alpha1.PolicyResult, p *promotionv1alpha1.Promotion, wave int32, approvals []promotionv1alpha1.Approval, now time.Time, editor *changeEditor) approvalTally {
	t := approvalTally{requirements: requirementsOf(policy, rules)}
	allowSelf := false
	if policy != nil {
		allowSelf = policy.AllowSelfApproval
		if policy.ExpireAfter != nil {
			t.expireAfter = policy.ExpireAfter.Duration
		}
	}
	approvals = slices.Clone(approvals)
	slices.SortFunc(approvals, func(a, b promotionv1alpha1.Approval) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	current, old := map[string]bool{}, map[string]bool{}
	counted := map[string]int{} // user → index in t.counted
	for i := range approvals {
		a := &approvals[i]
		spec := &a.Spec
		switch {
		case spec.Promotion != p.Name || spec.Stage != p.Spec.Stage || spec.Wave != wave:
			continue
		case spec.PlanDigest != p.Status.PlanDigest:
			old[spec.User] = true
			continue
		}
		current[spec.User] = true
		switch {
		case t.expired(a, now):
			t.ignore(spec.User, "expired")
		case !t.eligible(spec):
			t.ignore(spec.User, "not among the approvers of the stage")
		case spec.Decision == promotionv1alpha1.Reject:
			if t.rejected == nil {
				t.rejected = a
			}
		case spec.User == p.Spec.RequestedBy && !allowSelf:
			t.ignore(spec.User, "asked for the promotion")
		case editor != nil && !editor.known && !allowSelf:
			t.ignore(spec.User, "may have made the change: who made it is unknown (the operator's admission webhook did not record it), "+
				"so no approval is independent of its author")
		case editor != nil && spec.User == editor.name && !allowSelf:
			t.ignore(spec.User, "made the change")
		case spec.Decision == promotionv1alpha1.Approve:
			if j, ok := counted[spec.User]; ok {
				t.counted[j] = *a
			} else {
				counted[spec.User] = len(t.counted)
				t.counted = append(t.counted, *a)
			}
		}
	}
	for user := range old {
		if !current[user] {
			t.stale = true
		}
	}
	for i := range t.requirements {
		r := &t.requirements[i]
		for _, a := range t.counted {
			if eligible(r.from, &a.Spec) {
				r.count++
			}
		}
		if !r.requireEach {
			continue
		}
		for _, entry := range r.from {
			if !slices.ContainsFunc(t.counted, func(a promotionv1alpha1.Approval) bool { return matches(entry, &a.Spec) }) {
				r.missing = append(r.missing, entry)
			}
		}
	}
	return t
}

// eligible reports whether the decision spec comes from someone who
// counts for at least one requirement.
func (t *approvalTally) eligible(spec *promotionv1alpha1.ApprovalSpec) bool {
	return slices.ContainsFunc(t.requirements, func(r requirement) bool { return eligible(r.from, spec) })
}

// approved reports whether enough approvals count, for every requirement.
func (t *approvalTally) approved() bool {
	if t.rejected != nil {
		return false
	}
	for i := range t.requirements {
		if !t.requirements[i].satisfied() {
			return false
		}
	}
	return true
}

// expired reports whether a no longer counts at now.
func (t *approvalTally) expired(a *promotionv1alpha1.Approval, now time.Time) bool {
	return t.expireAfter > 0 && !now.Before(a.CreationTimestamp.Add(t.expireAfter))
}

// ignore notes that user's decision does not count, and why.
func (t *approvalTally) ignore(user, why string) {
	note := fmt.Sprintf("%s (%s)", user, why)
	if !slices.Contains(t.ignored, note) {
		t.ignored = append(t.ignored, note)
	}
}

// message says what the promotion waits for, requirement by
// requirement, e.g. "waiting for approval: 1 of 2 (needs one from group
// security); policy db-replace needs 2 of group dba: 1 so far".
func (t *approvalTally) message() string {
	var b strings.Builder
	if t.stale {
		b.WriteString("inputs changed since approval; approve again; ")
	}
	var waiting []string
	for i := range t.requirements {
		if r := &t.requirements[i]; !r.satisfied() {
			waiting = append(waiting, r.describe())
		}
	}
	fmt.Fprintf(&b, "waiting for approval: %s", strings.Join(waiting, "; "))
	if len(t.ignored) > 0 {
		fmt.Fprintf(&b, "; not counted: %s", strings.Join(t.ignored, ", "))
	}
	return b.String()
}

// recheck is when to look again while waiting: when the first counted
// approval expires, or after approvalWait.
func (t *approvalTally) recheck(now time.Time) time.Duration {
	wait := approvalWait
	if t.expireAfter <= 0 {
		return wait
	}
	for _, a := range t.counted {
		if d := a.CreationTimestamp.Add(t.expireAfter).Sub(now) + time.Second; d < wait {
			wait = max(d, time.Second)
		}
	}
	return wait
}

// records are the decisions that count, as status.approvals keeps them:
// the counted approvals and the rejection, oldest first.
func (t *approvalTally) records() []promotionv1alpha1.ApprovalRecord {
	decisions := slices.Clone(t.counted)
	if t.rejected != nil {
		decisions = append(decisions, *t.rejected)
		slices.SortStableFunc(decisions, func(a, b promotionv1alpha1.Approval) int {
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		})
	}
	if len(decisions) > maxApprovalRecords {
		decisions = decisions[:maxApprovalRecords]
	}
	var out []promotionv1alpha1.ApprovalRecord
	for _, a := range decisions {
		out = append(out, promotionv1alpha1.ApprovalRecord{
			Approval: a.Name, User: a.Spec.User, Groups: a.Spec.Groups, Decision: a.Spec.Decision, Comment: a.Spec.Comment, Time: a.CreationTimestamp,
		})
	}
	return out
}

// eligible reports whether the decision spec comes from someone from
// lists; anyone, when it is empty.
func eligible(from []promotionv1alpha1.Approver, spec *promotionv1alpha1.ApprovalSpec) bool {
	return len(from) == 0 || slices.ContainsFunc(from, func(entry promotionv1alpha1.Approver) bool { return matches(entry, spec) })
}

// matches reports whether the decision spec comes from entry: its user,
// or a member of its group.
func matches(entry promotionv1alpha1.Approver, spec *promotionv1alpha1.ApprovalSpec) bool {
	if entry.User != "" {
		return spec.User == entry.User
	}
	return entry.Group != "" && slices.Contains(spec.Groups, entry.Group)
}

// approverString renders entry as "user alice" or "group security".
func approverString(entry promotionv1alpha1.Approver) string {
	if entry.User != "" {
		return "user " + entry.User
	}
	return "group " + entry.Group
}
