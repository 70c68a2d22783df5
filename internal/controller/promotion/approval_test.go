package promotion

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

const (
	digest    = "sha256:current"
	oldDigest = "sha256:before"
)

// decision is an Approval of promotion prod-1 into stage prod, for the
// current digest, created at t0+at.
func decision(name, user string, groups []string, d promotionv1alpha1.ApprovalDecision, at time.Duration) promotionv1alpha1.Approval {
	return promotionv1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(at))},
		Spec: promotionv1alpha1.ApprovalSpec{
			Promotion: "prod-1", Stage: "prod", PlanDigest: digest, Decision: d, User: user, Groups: groups, Comment: "because",
		},
	}
}

func approve(name, user string, at time.Duration, groups ...string) promotionv1alpha1.Approval {
	return decision(name, user, groups, promotionv1alpha1.Approve, at)
}

func reject(name, user string, at time.Duration, groups ...string) promotionv1alpha1.Approval {
	return decision(name, user, groups, promotionv1alpha1.Reject, at)
}

// with returns a changed by change.
func with(a promotionv1alpha1.Approval, change func(*promotionv1alpha1.ApprovalSpec)) promotionv1alpha1.Approval {
	change(&a.Spec)
	return a
}

func TestTally(t *testing.T) {
	groups := func(names ...string) []promotionv1alpha1.Approver {
		var out []promotionv1alpha1.Approver
		for _, n := range names {
			out = append(out, promotionv1alpha1.Approver{Group: n})
		}
		return out
	}
	twoOf := &promotionv1alpha1.ApprovalPolicy{Required: 2, From: groups("qa", "security")}
	each := &promotionv1alpha1.ApprovalPolicy{Required: 2, From: groups("qa", "security"), RequireEach: true}
	anyone := &promotionv1alpha1.ApprovalPolicy{Required: 1}
	selfOK := &promotionv1alpha1.ApprovalPolicy{Required: 1, AllowSelfApproval: true}
	hour := &promotionv1alpha1.ApprovalPolicy{Required: 1, ExpireAfter: &metav1.Duration{Duration: time.Hour}}
	tests := []struct {
		name      string
		policy    *promotionv1alpha1.ApprovalPolicy
		approvals []promotionv1alpha1.Approval
		now       time.Duration // after t0
		approved  bool
		counted   []string // users
		rejected  string   // user
		message   string
		recheck   time.Duration
		editor    *changeEditor // a held change's author
	}{
		{name: "a wave's decisions are not the promotion's", policy: anyone,
			approvals: []promotionv1alpha1.Approval{
				with(approve("a", "bob", 0), func(s *promotionv1alpha1.ApprovalSpec) { s.Wave = 2 }),
				with(reject("b", "carol", time.Second), func(s *promotionv1alpha1.ApprovalSpec) { s.Wave = 3 }),
			},
			message: "waiting for approval: 0 of 1"},
		{name: "a held change: its author's approval does not count", policy: anyone, editor: &changeEditor{name: "alice", known: true},
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0)},
			message:   "waiting for approval: 0 of 1; not counted: alice (made the change)"},
		{name: "a held change: another's approval counts", policy: anyone, editor: &changeEditor{name: "alice", known: true},
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0), approve("b", "bob", time.Second)},
			approved:  true, counted: []string{"bob"}},
		{name: "a held change of an unknown author: no approval counts", policy: anyone, editor: &changeEditor{},
			approvals: []promotionv1alpha1.Approval{approve("b", "bob", 0)}},
		{name: "a held change of an unknown author, the stage allowing self-approval", policy: selfOK, editor: &changeEditor{},
			approvals: []promotionv1alpha1.Approval{approve("b", "bob", 0)}, approved: true, counted: []string{"bob"}},
		{name: "none yet", policy: twoOf,
			message: "waiting for approval: 0 of 2 (from group qa or group security)", recheck: approvalWait},
		{name: "one of two", policy: twoOf, approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa")},
			counted: []string{"alice"}, message: "waiting for approval: 1 of 2 (from group qa or group security)"},
		{name: "two of two, by group", policy: twoOf,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), approve("b", "bob", time.Second, "security", "system:authenticated")},
			approved:  true, counted: []string{"alice", "bob"}},
		{name: "a user counts once", policy: twoOf,
			approvals: []promotionv1alpha1.Approval{approve("a1", "alice", 0, "qa"), approve("a2", "alice", time.Second, "qa")},
			counted:   []string{"alice"}, message: "waiting for approval: 1 of 2 (from group qa or group security)"},
		{name: "outside the groups", policy: twoOf,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), approve("c", "carol", 0, "dev")},
			counted:   []string{"alice"},
			message:   "waiting for approval: 1 of 2 (from group qa or group security); not counted: carol (not among the approvers of the stage)"},
		{name: "a named user", policy: &promotionv1alpha1.ApprovalPolicy{Required: 1, From: []promotionv1alpha1.Approver{{User: "carol"}}},
			approvals: []promotionv1alpha1.Approval{approve("c", "carol", 0)}, approved: true, counted: []string{"carol"}},
		{name: "require each: two of one group are not enough", policy: each,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), approve("d", "dave", 0, "qa")},
			counted:   []string{"alice", "dave"}, message: "waiting for approval: 2 of 2 (needs one from group security)"},
		{name: "require each: one of each", policy: each,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), approve("b", "bob", 0, "security")},
			approved:  true, counted: []string{"alice", "bob"}},
		{name: "require each: the count still applies", policy: each,
			approvals: []promotionv1alpha1.Approval{approve("e", "eve", 0, "qa", "security")},
			counted:   []string{"eve"}, message: "waiting for approval: 1 of 2 (from group qa or group security)"},
		{name: "the requester's own approval does not count", policy: anyone,
			approvals: []promotionv1alpha1.Approval{approve("r", "requester", 0)},
			message:   "waiting for approval: 0 of 1; not counted: requester (asked for the promotion)"},
		{name: "unless the stage allows it", policy: selfOK,
			approvals: []promotionv1alpha1.Approval{approve("r", "requester", 0)}, approved: true, counted: []string{"requester"}},
		{name: "an approval expires", policy: hour, now: 2 * time.Hour,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0), approve("b", "bob", 90*time.Minute)},
			approved:  true, counted: []string{"bob"}},
		{name: "expired, so waiting again", policy: &promotionv1alpha1.ApprovalPolicy{Required: 2, ExpireAfter: &metav1.Duration{Duration: time.Hour}},
			now:       2 * time.Hour,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0), approve("b", "bob", 90*time.Minute)},
			counted:   []string{"bob"}, message: "waiting for approval: 1 of 2; not counted: alice (expired)",
			recheck: 30*time.Minute + time.Second},
		{name: "another digest does not count", policy: anyone,
			approvals: []promotionv1alpha1.Approval{with(approve("a", "alice", 0), func(s *promotionv1alpha1.ApprovalSpec) { s.PlanDigest = oldDigest })},
			message:   "inputs changed since approval; approve again; waiting for approval: 0 of 1"},
		{name: "approved again for the new digest", policy: anyone,
			approvals: []promotionv1alpha1.Approval{
				with(approve("a", "alice", 0), func(s *promotionv1alpha1.ApprovalSpec) { s.PlanDigest = oldDigest }),
				approve("a2", "alice", time.Minute),
			},
			approved: true, counted: []string{"alice"}},
		{name: "another stage or promotion does not count", policy: anyone,
			approvals: []promotionv1alpha1.Approval{
				with(approve("a", "alice", 0), func(s *promotionv1alpha1.ApprovalSpec) { s.Stage = "dev" }),
				with(approve("b", "bob", 0), func(s *promotionv1alpha1.ApprovalSpec) { s.Promotion = "prod-2" }),
			},
			message: "waiting for approval: 0 of 1"},
		{name: "one rejection fails it", policy: twoOf,
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), approve("b", "bob", time.Second, "security"), reject("x", "xavier", 2*time.Second, "security")},
			counted:   []string{"alice", "bob"}, rejected: "xavier"},
		{name: "the requester may withdraw", policy: anyone,
			approvals: []promotionv1alpha1.Approval{reject("r", "requester", 0)}, rejected: "requester"},
		{name: "a rejection from outside the approvers does not count", policy: twoOf,
			approvals: []promotionv1alpha1.Approval{reject("c", "carol", 0, "dev")},
			message:   "waiting for approval: 0 of 2 (from group qa or group security); not counted: carol (not among the approvers of the stage)"},
		{name: "a rejection of another digest does not count", policy: anyone,
			approvals: []promotionv1alpha1.Approval{
				with(reject("x", "xavier", 0), func(s *promotionv1alpha1.ApprovalSpec) { s.PlanDigest = oldDigest }),
				approve("a", "alice", time.Second),
			},
			approved: true, counted: []string{"alice"}},
		{name: "an expired rejection does not count", policy: hour, now: 2 * time.Hour,
			approvals: []promotionv1alpha1.Approval{reject("x", "xavier", 0), approve("a", "alice", time.Hour+time.Minute)},
			approved:  true, counted: []string{"alice"}},
	}
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "prod-1"}}
	p.Spec.Stage, p.Spec.RequestedBy, p.Status.PlanDigest = "prod", "requester", digest
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.now)
			got := tally(tt.policy, nil, p, 0, tt.approvals, now, tt.editor)
			if got.approved() != tt.approved {
				t.Errorf("approved = %v, want %v (%s)", got.approved(), tt.approved, got.message())
			}
			var users []string
			for _, a := range got.counted {
				users = append(users, a.Spec.User)
			}
			if !slices.Equal(users, tt.counted) {
				t.Errorf("counted %v, want %v", users, tt.counted)
			}
			switch {
			case tt.rejected == "" && got.rejected != nil:
				t.Errorf("rejected by %s", got.rejected.Spec.User)
			case tt.rejected != "" && (got.rejected == nil || got.rejected.Spec.User != tt.rejected):
				t.Errorf("rejected = %v, want by %s", got.rejected, tt.rejected)
			}
			if tt.message != "" && got.message() != tt.message {
				t.Errorf("message\n %q, want\n %q", got.message(), tt.message)
			}
			if tt.recheck != 0 && got.recheck(now) != tt.recheck {
				t.Errorf("recheck after %s, want %s", got.recheck(now), tt.recheck)
			}
			want := len(tt.counted)
			if tt.rejected != "" {
				want++
			}
			if records := got.records(); len(records) != want {
				t.Errorf("%d records, want %d: %+v", len(records), want, records)
			}
		})
	}
}

func TestApprovalRecords(t *testing.T) {
	policy := &promotionv1alpha1.ApprovalPolicy{Required: 3}
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "prod-1"}}
	p.Spec.Stage, p.Status.PlanDigest = "prod", digest
	tallied := tally(policy, nil, p, 0, []promotionv1alpha1.Approval{
		reject("x", "xavier", 2*time.Second, "security"), approve("b", "bob", time.Second, "qa"), approve("a", "alice", 0),
	}, t0, nil)
	got := tallied.records()
	want := []promotionv1alpha1.ApprovalRecord{
		{Approval: "a", User: "alice", Decision: promotionv1alpha1.Approve, Comment: "because", Time: metav1.NewTime(t0)},
		{Approval: "b", User: "bob", Groups: []string{"qa"}, Decision: promotionv1alpha1.Approve, Comment: "because", Time: metav1.NewTime(t0.Add(time.Second))},
		{Approval: "x", User: "xavier", Groups: []string{"security"}, Decision: promotionv1alpha1.Reject, Comment: "because", Time: metav1.NewTime(t0.Add(2 * time.Second))},
	}
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Approval != want[i].Approval || got[i].User != want[i].User || !slices.Equal(got[i].Groups, want[i].Groups) ||
			got[i].Decision != want[i].Decision || got[i].Comment != want[i].Comment || !got[i].Time.Equal(&want[i].Time) {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestApprovalRequired(t *testing.T) {
	skip := &promotionv1alpha1.ApprovalPolicy{Required: 1, SkipForRollback: true}
	tests := []struct {
		name     string
		policy   *promotionv1alpha1.ApprovalPolicy
		rollback bool
		by       string
		want     bool
	}{
		{name: "no policy", by: "alice"},
		{name: "a promotion", policy: skip, by: "alice", want: true},
		{name: "an auto-promotion", policy: skip, by: promotionv1alpha1.RequestedByAutoPromotion, want: true},
		{name: "a rollback a person asks for", policy: skip, rollback: true, by: "alice", want: true},
		{name: "an automatic rollback the stage lets skip", policy: skip, rollback: true, by: promotionv1alpha1.RequestedByAutoPromotion},
		{name: "an automatic rollback", policy: &promotionv1alpha1.ApprovalPolicy{Required: 1}, rollback: true, by: promotionv1alpha1.RequestedByAutoPromotion, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &promotionv1alpha1.Stage{Spec: promotionv1alpha1.StageSpec{Approval: tt.policy}}
			p := &promotionv1alpha1.Promotion{Spec: promotionv1alpha1.PromotionSpec{Rollback: tt.rollback, RequestedBy: tt.by}}
			if got := approvalRequired(st, p, nil); got != tt.want {
				t.Errorf("approvalRequired = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTallyWithRules: fired RequireApproval policy rules add requirements
// on top of the stage's approval policy, each counted on the same
// approvals, with the stage's self-approval ban and expiry.
func TestTallyWithRules(t *testing.T) {
	dba := promotionv1alpha1.PolicyResult{
		Name: "db-replace", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval,
		Required: 2, From: []promotionv1alpha1.Approver{{Group: "dba"}},
	}
	audit := promotionv1alpha1.PolicyResult{
		Name: "audit", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval, Required: 1,
		From: []promotionv1alpha1.Approver{{Group: "security"}, {User: "carol"}}, RequireEach: true,
	}
	anyone := promotionv1alpha1.PolicyResult{Name: "big", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval, Required: 1}
	qa := &promotionv1alpha1.ApprovalPolicy{Required: 1, From: []promotionv1alpha1.Approver{{Group: "qa"}}}
	tests := []struct {
		name      string
		policy    *promotionv1alpha1.ApprovalPolicy
		rules     []promotionv1alpha1.PolicyResult
		approvals []promotionv1alpha1.Approval
		approved  bool
		counted   []string
		rejected  string
		message   string
	}{
		{name: "a rule alone", rules: []promotionv1alpha1.PolicyResult{dba},
			message: "waiting for approval: policy db-replace needs 2 of group dba: 0 so far"},
		{name: "the requester's own approval does not count for a rule", rules: []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("r", "requester", 0, "dba"), approve("d", "dora", 0, "dba")},
			counted:   []string{"dora"},
			message:   "waiting for approval: policy db-replace needs 2 of group dba: 1 so far; not counted: requester (asked for the promotion)"},
		{name: "unless the stage allows it", policy: &promotionv1alpha1.ApprovalPolicy{Required: 1, AllowSelfApproval: true},
			rules:     []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("r", "requester", 0, "dba"), approve("d", "dora", 0, "dba")},
			approved:  true, counted: []string{"dora", "requester"}},
		{name: "approvals from outside the rule's group do not satisfy it", rules: []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("d", "dora", 0, "dba"), approve("m", "mallory", 0, "dev")},
			counted:   []string{"dora"},
			message:   "waiting for approval: policy db-replace needs 2 of group dba: 1 so far; not counted: mallory (not among the approvers of the stage)"},
		{name: "the stage's approvers count for the stage, not for the rule", policy: qa, rules: []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), approve("d", "dora", 0, "dba")},
			counted:   []string{"alice", "dora"}, message: "waiting for approval: policy db-replace needs 2 of group dba: 1 so far"},
		{name: "both unmet", policy: qa, rules: []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("d", "dora", 0, "dba")},
			counted:   []string{"dora"},
			message:   "waiting for approval: 0 of 1 (from group qa); policy db-replace needs 2 of group dba: 1 so far"},
		{name: "one person counts for the stage and the rule", policy: qa, rules: []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("e", "erin", 0, "qa", "dba"), approve("d", "dora", 0, "dba")},
			approved:  true, counted: []string{"dora", "erin"}},
		{name: "a rule with require each", rules: []promotionv1alpha1.PolicyResult{audit},
			approvals: []promotionv1alpha1.Approval{approve("b", "bob", 0, "security")},
			counted:   []string{"bob"}, message: "waiting for approval: policy audit needs 1 of group security or user carol: 1 so far (needs one from user carol)"},
		{name: "a rule from anyone", rules: []promotionv1alpha1.PolicyResult{anyone, dba},
			message: "waiting for approval: policy big needs 1 approval: 0 so far; policy db-replace needs 2 of group dba: 0 so far"},
		{name: "every rule met", rules: []promotionv1alpha1.PolicyResult{anyone, dba},
			approvals: []promotionv1alpha1.Approval{approve("d", "dora", 0, "dba"), approve("f", "fred", time.Second, "dba")},
			approved:  true, counted: []string{"dora", "fred"}},
		{name: "a rule's approver may reject", policy: qa, rules: []promotionv1alpha1.PolicyResult{dba},
			approvals: []promotionv1alpha1.Approval{approve("a", "alice", 0, "qa"), reject("d", "dora", time.Second, "dba")},
			counted:   []string{"alice"}, rejected: "dora"},
	}
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "prod-1"}}
	p.Spec.Stage, p.Spec.RequestedBy, p.Status.PlanDigest = "prod", "requester", digest
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tally(tt.policy, tt.rules, p, 0, tt.approvals, t0, nil)
			if got.approved() != tt.approved {
				t.Errorf("approved = %v, want %v (%s)", got.approved(), tt.approved, got.message())
			}
			var users []string
			for _, a := range got.counted {
				users = append(users, a.Spec.User)
			}
			if !slices.Equal(users, tt.counted) {
				t.Errorf("counted %v, want %v", users, tt.counted)
			}
			if (got.rejected == nil) != (tt.rejected == "") || (got.rejected != nil && got.rejected.Spec.User != tt.rejected) {
				t.Errorf("rejected = %v, want %q", got.rejected, tt.rejected)
			}
			if tt.message != "" && got.message() != tt.message {
				t.Errorf("message\n %q, want\n %q", got.message(), tt.message)
			}
		})
	}
}

func TestApprovalRequiredByRules(t *testing.T) {
	fired := []promotionv1alpha1.PolicyResult{{Name: "db", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval, Required: 1}}
	skip := &promotionv1alpha1.ApprovalPolicy{Required: 1, SkipForRollback: true}
	tests := []struct {
		name     string
		policy   *promotionv1alpha1.ApprovalPolicy
		rules    []promotionv1alpha1.PolicyResult
		rollback bool
		by       string
		want     bool
	}{
		{name: "no policy, no rule", by: "alice"},
		{name: "a rule without a stage policy", rules: fired, by: "alice", want: true},
		{name: "an automatic rollback, with a rule", rules: fired, rollback: true, by: promotionv1alpha1.RequestedByAutoPromotion, want: true},
		{name: "an automatic rollback the stage lets skip every approval", policy: skip, rules: fired, rollback: true,
			by: promotionv1alpha1.RequestedByAutoPromotion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &promotionv1alpha1.Stage{Spec: promotionv1alpha1.StageSpec{Approval: tt.policy}}
			p := &promotionv1alpha1.Promotion{Spec: promotionv1alpha1.PromotionSpec{Rollback: tt.rollback, RequestedBy: tt.by}}
			if got := approvalRequired(st, p, tt.rules); got != tt.want {
				t.Errorf("approvalRequired = %v, want %v", got, tt.want)
			}
		})
	}
}
