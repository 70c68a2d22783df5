package change

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// summary is the part of a moment each case checks.
type summary struct {
	Event, Key, Stage, Pipeline, Release, Commit, By, Phase string
}

func summarize(ms []Moment) []summary {
	out := make([]summary, 0, len(ms))
	for _, m := range ms {
		out = append(out, summary{m.Event, m.Key, m.Stage, m.Pipeline, m.Release, m.Commit, m.By, m.Phase})
	}
	return out
}

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	ptrAt := func(d time.Duration) *metav1.Time { v := at(d); return &v }
	release := promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "team", UID: "rel", CreationTimestamp: at(0)},
		Spec:       promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{SHA: "abc", Subject: "fix"}},
	}
	stage := promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "prod"},
		Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "web-prod"}}}}
	promotion := func(mut func(p *promotionv1alpha1.Promotion)) promotionv1alpha1.Promotion {
		p := promotionv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "pro", CreationTimestamp: at(time.Minute)},
			Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r1", RequestedBy: "ada"},
		}
		mut(&p)
		return p
	}
	cases := []struct {
		name string
		objs TimelineObjects
		want []summary
	}{{
		name: "a release alone",
		objs: TimelineObjects{Releases: []promotionv1alpha1.Release{release}},
		want: []summary{{Event: "ReleaseDiscovered", Key: "release/rel/discovered", Pipeline: "web", Release: "r1", Commit: "abc"}},
	}, {
		name: "a promotion awaiting approval, with a policy that fired: the commit comes from the release until it starts",
		objs: TimelineObjects{Stages: []promotionv1alpha1.Stage{stage}, Releases: []promotionv1alpha1.Release{release},
			Promotions: []promotionv1alpha1.Promotion{promotion(func(p *promotionv1alpha1.Promotion) {
				p.Status.Phase, p.Status.Reason = promotionv1alpha1.PromotionPending, promotionv1alpha1.PromotionReasonAwaitingApproval
				p.Status.Policies = []promotionv1alpha1.PolicyResult{{Name: "two-eyes", Fired: true, Action: "RequireApproval"}, {Name: "quiet"}}
			})}},
		want: []summary{
			{Event: "ReleaseDiscovered", Key: "release/rel/discovered", Pipeline: "web", Release: "r1", Commit: "abc"},
			{Event: "PromotionRequested", Key: "promotion/pro/requested", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "abc", By: "ada"},
			{Event: "PolicyFired", Key: "promotion/pro/policy/two-eyes", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "abc", Phase: "RequireApproval"},
			{Event: "PromotionAwaitingApproval", Key: "promotion/pro/AwaitingApproval", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "abc", Phase: "Pending"},
		},
	}, {
		name: "a rollback that succeeded after a failed verification, and the approval given on it",
		objs: TimelineObjects{Stages: []promotionv1alpha1.Stage{stage},
			Promotions: []promotionv1alpha1.Promotion{promotion(func(p *promotionv1alpha1.Promotion) {
				p.Spec.Rollback = true
				p.Status.Phase, p.Status.Commit = promotionv1alpha1.PromotionSucceeded, "def"
				p.Status.StartTime, p.Status.EndTime = ptrAt(3*time.Minute), ptrAt(5*time.Minute)
				p.Status.Verification = &promotionv1alpha1.VerificationStatus{Phase: "Failed"}
			})},
			Approvals: []promotionv1alpha1.Approval{{
				ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "app", CreationTimestamp: at(2 * time.Minute)},
				Spec:       promotionv1alpha1.ApprovalSpec{Stage: "prod", Promotion: "p", User: "bob", Decision: promotionv1alpha1.Approve},
			}}},
		want: []summary{
			{Event: "PromotionRequested", Key: "promotion/pro/requested", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", By: "ada"},
			{Event: "ApprovalGiven", Key: "approval/app", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", By: "bob", Phase: "Approve"},
			{Event: "PromotionStarted", Key: "promotion/pro/started", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def"},
			{Event: "PromotionFinished", Key: "promotion/pro/Succeeded", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", Phase: "Succeeded"},
			{Event: "RolledBack", Key: "promotion/pro/RolledBack", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", Phase: "Succeeded"},
			{Event: "VerificationFailed", Key: "promotion/pro/VerificationFailed", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", Phase: "Succeeded"},
		},
	}, {
		name: "a rollout halted by a person, resumed, halted by its budget and aborted, in that order",
		objs: TimelineObjects{Stages: []promotionv1alpha1.Stage{stage},
			Promotions: []promotionv1alpha1.Promotion{promotion(func(p *promotionv1alpha1.Promotion) {
				p.Status.Phase, p.Status.Commit = promotionv1alpha1.PromotionAborted, "def"
				p.Status.StartTime, p.Status.EndTime = ptrAt(2*time.Minute), ptrAt(9*time.Minute)
				p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Halts: []promotionv1alpha1.RolloutHalt{
					{Time: at(3 * time.Minute), Reason: "halted by bob", By: "bob"},
					{Time: at(5 * time.Minute), Reason: "the failure budget is spent"},
				}, Interventions: []promotionv1alpha1.InterventionRecord{
					{Intervention: "p-1", Action: promotionv1alpha1.Halt, User: "bob", Time: at(3 * time.Minute)},
					{Intervention: "p-2", Action: promotionv1alpha1.Resume, User: "carol", Time: at(4 * time.Minute)},
					{Intervention: "p-3", Action: promotionv1alpha1.Abort, User: "bob", Time: at(8 * time.Minute)},
				}}
			})}},
		want: []summary{
			{Event: "PromotionRequested", Key: "promotion/pro/requested", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", By: "ada"},
			{Event: "PromotionStarted", Key: "promotion/pro/started", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def"},
			{Event: "RolloutHalted", Key: "promotion/pro/halted/1", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", By: "bob", Phase: "Halt"},
			{Event: "RolloutResumed", Key: "promotion/pro/intervention/p-2", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", By: "carol", Phase: "Resume"},
			{Event: "RolloutHalted", Key: "promotion/pro/halted/2", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", Phase: "Halt"},
			{Event: "RolloutAborted", Key: "promotion/pro/intervention/p-3", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", By: "bob", Phase: "Abort"},
			{Event: "PromotionFinished", Key: "promotion/pro/Aborted", Stage: "prod", Pipeline: "web", Release: "r1", Commit: "def", Phase: "Aborted"},
		},
	}, {
		name: "a rejection of a promotion nobody can read any more still names its stage",
		objs: TimelineObjects{Approvals: []promotionv1alpha1.Approval{{
			ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "app", CreationTimestamp: at(0)},
			Spec:       promotionv1alpha1.ApprovalSpec{Stage: "prod", Promotion: "gone", User: "bob", Decision: promotionv1alpha1.Reject},
		}}},
		want: []summary{{Event: "ApprovalRejected", Key: "approval/app", Stage: "prod", By: "bob", Phase: "Reject"}},
	}, {
		name: "a stalled Stack of a stage that also drifted",
		objs: TimelineObjects{Stages: []promotionv1alpha1.Stage{stage}, Stacks: []pulumiv1.Stack{func() pulumiv1.Stack {
			s := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web-prod", UID: "st", Generation: 3}}
			sreconcile.MarkStalled(&s.Status.Conditions, 3, "SpecInvalid", "bad")
			s.Status.LastUpdate = &shared.StackUpdateState{LastSuccessfulCommit: "abc"}
			s.Status.LastDriftCheck = &shared.DriftCheck{Name: "web-prod-x", Drifted: true, Time: metav1.NewTime(time.Now().Add(time.Hour))}
			return s
		}()}},
		want: []summary{
			{Event: "StackStalled", Key: "stack/st/stalled/3", Stage: "prod", Pipeline: "web", Commit: "abc", Phase: "Stalled"},
			{Event: "DriftDetected", Key: "stack/st/drift/web-prod-x", Stage: "prod", Pipeline: "web", Commit: "abc", Phase: "Drifted"},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(summarize(Timeline(&tc.objs))).To(Equal(tc.want))
		})
	}
}

// TestTimelineOrdersTheSameSecond puts the moments of one second in the
// order they happen, whatever the order of the objects.
func TestTimelineOrdersTheSameSecond(t *testing.T) {
	g := NewWithT(t)
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	objs := TimelineObjects{
		Promotions: []promotionv1alpha1.Promotion{{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "pro", CreationTimestamp: now},
			Spec:       promotionv1alpha1.PromotionSpec{Stage: "dev", Release: "r1"},
			Status:     promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionFailed, StartTime: &now, EndTime: &now},
		}},
		Releases: []promotionv1alpha1.Release{{ObjectMeta: metav1.ObjectMeta{Name: "r1", UID: "rel", CreationTimestamp: now}}},
	}
	var events []string
	for _, m := range Timeline(&objs) {
		events = append(events, m.Event)
	}
	g.Expect(events).To(Equal([]string{"ReleaseDiscovered", "PromotionRequested", "PromotionStarted", "PromotionFinished"}))
}
