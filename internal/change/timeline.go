package change

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// AuditEvents are the events of the audit trail (`stackyard history`, the
// dashboard's audit page), in the order they happen to one promotion: the
// moments that are history, as opposed to a state that holds now
// (PromotionAwaitingApproval, StackStalled).
var AuditEvents = []string{
	promotionv1alpha1.EventReleaseDiscovered, promotionv1alpha1.EventPromotionRequested, promotionv1alpha1.EventPolicyFired,
	promotionv1alpha1.EventApprovalGiven, promotionv1alpha1.EventApprovalRejected, promotionv1alpha1.EventPromotionStarted,
	promotionv1alpha1.EventPromotionFinished,
}

// Moment is one event of change management, read back from the objects
// that record it: a Release's creation, a Promotion's request, start, end
// and the policy rules that fired on it, an Approval, a Stack that stalled
// or drifted. It is the one timeline that alerts, `stackyard history`, the
// dashboard and the cloud API's audit read.
type Moment struct {
	// Time is when it happened.
	Time metav1.Time `json:"time"`
	// Event is what happened: a name of the event vocabulary
	// (promotionv1alpha1.Event*).
	Event string `json:"event"`
	// Pipeline is the pipeline it belongs to, if known.
	Pipeline string `json:"pipeline,omitempty"`
	// Stage is the stage, for promotion and approval events, and for a
	// Stack a stage binds.
	Stage string `json:"stage,omitempty"`
	// Release is the release.
	Release string `json:"release"`
	// Commit is the release's commit SHA, or the Stack's last deployed
	// commit, when known.
	Commit string `json:"commit,omitempty"`
	// Promotion is the Promotion, for promotion and approval events.
	Promotion string `json:"promotion,omitempty"`
	// Rollback marks a rollback.
	Rollback bool `json:"rollback,omitempty"`
	// By is who asked, for a request, or who decided, for an approval.
	By string `json:"by,omitempty"`
	// Groups are the groups of who decided, for an approval.
	Groups []string `json:"groups,omitempty"`
	// Phase is how a promotion ended, the decision (Approve, Reject) of
	// an approval, the action of a fired policy rule, or a Stack's state
	// (Stalled, Drifted).
	Phase string `json:"phase,omitempty"`
	// Message is the promotion's message when it ended, the approver's
	// comment, a fired policy rule's message, a Stack's stall or drift
	// message.
	Message string `json:"message,omitempty"`
	// Policy is the policy rule that fired, for PolicyFired.
	Policy string `json:"policy,omitempty"`

	// Key identifies the moment for good: the same moment read again has
	// the same key, so that a notification is delivered once.
	Key string `json:"-"`
	// Namespace, Kind and Name name the object the moment is about
	// (Release, Promotion, Approval, Stack).
	Namespace string `json:"-"`
	// Kind is the kind of that object.
	Kind string `json:"-"`
	// Name is the name of that object.
	Name string `json:"-"`
	// Subject is a Release's commit subject, for ReleaseDiscovered.
	Subject string `json:"-"`
}

// TimelineObjects are the objects of one namespace the timeline is read
// from. Any of them may be left out: its moments are then missing.
type TimelineObjects struct {
	Releases   []promotionv1alpha1.Release
	Promotions []promotionv1alpha1.Promotion
	Approvals  []promotionv1alpha1.Approval
	Stages     []promotionv1alpha1.Stage
	Stacks     []pulumiv1.Stack
}

// Timeline returns every moment objs record, oldest first; moments of the
// same second are in the order they happen (AuditEvents), then by key.
func Timeline(objs *TimelineObjects) []Moment {
	t := timeline{stages: map[string]*promotionv1alpha1.Stage{}, releases: map[string]*promotionv1alpha1.Release{},
		promotions: map[string]*promotionv1alpha1.Promotion{}, stackStage: map[string]*promotionv1alpha1.Stage{}}
	for i := range objs.Stages {
		s := &objs.Stages[i]
		t.stages[s.Name] = s
		members, _ := Members(s, objs.Stacks) // an invalid selector selects nothing
		for _, b := range members.Bindings {
			t.stackStage[b.Name] = s
		}
	}
	for i := range objs.Releases {
		r := &objs.Releases[i]
		t.releases[r.Name] = r
		t.add(Moment{
			Time: r.CreationTimestamp, Event: promotionv1alpha1.EventReleaseDiscovered, Pipeline: r.Spec.Pipeline,
			Release: r.Name, Commit: r.Spec.Commit.SHA, Subject: r.Spec.Commit.Subject,
			Key: "release/" + string(r.UID) + "/discovered", Namespace: r.Namespace, Kind: "Release", Name: r.Name,
		})
	}
	for i := range objs.Promotions {
		t.promotions[objs.Promotions[i].Name] = &objs.Promotions[i]
		t.promotion(&objs.Promotions[i])
	}
	for i := range objs.Approvals {
		t.approval(&objs.Approvals[i])
	}
	for i := range objs.Stacks {
		t.stack(&objs.Stacks[i])
	}
	slices.SortStableFunc(t.out, func(a, b Moment) int {
		return cmp.Or(a.Time.Compare(b.Time.Time), eventOrder(a.Event)-eventOrder(b.Event), strings.Compare(a.Key, b.Key))
	})
	return t.out
}

// timeline is Timeline's work in progress.
type timeline struct {
	stages     map[string]*promotionv1alpha1.Stage
	releases   map[string]*promotionv1alpha1.Release
	promotions map[string]*promotionv1alpha1.Promotion
	stackStage map[string]*promotionv1alpha1.Stage
	out        []Moment
}

func (t *timeline) add(m Moment) { t.out = append(t.out, m) }

// ofPromotion is what every moment of a Promotion carries: its stage,
// release and commit, and the pipeline of its stage (or release).
func (t *timeline) ofPromotion(p *promotionv1alpha1.Promotion) Moment {
	m := Moment{Stage: p.Spec.Stage, Release: p.Spec.Release, Commit: p.Status.Commit, Promotion: p.Name,
		Rollback: p.Spec.Rollback, Namespace: p.Namespace, Kind: "Promotion", Name: p.Name}
	if s := t.stages[p.Spec.Stage]; s != nil {
		m.Pipeline = s.Spec.Pipeline
	}
	if r := t.releases[p.Spec.Release]; r != nil {
		m.Pipeline = cmp.Or(m.Pipeline, r.Spec.Pipeline)
		m.Commit = cmp.Or(m.Commit, r.Spec.Commit.SHA)
	}
	return m
}

// promotion adds a Promotion's moments: its request, the policy rules
// that fired on it, the approval it awaits now, its start, its end, and
// what its end means (a rollback done, a verification failed).
func (t *timeline) promotion(p *promotionv1alpha1.Promotion) {
	base := t.ofPromotion(p)
	key := "promotion/" + string(p.UID) + "/"
	at := func(event string, when metav1.Time, suffix string) Moment {
		m := base
		m.Event, m.Time, m.Key = event, when, key+suffix
		return m
	}
	req := at(promotionv1alpha1.EventPromotionRequested, p.CreationTimestamp, "requested")
	req.By = p.Spec.RequestedBy
	t.add(req)
	for _, r := range p.Status.Policies {
		if r.Fired {
			fired := at(promotionv1alpha1.EventPolicyFired, p.CreationTimestamp, "policy/"+r.Name)
			fired.Policy, fired.Phase, fired.Message = r.Name, string(r.Action), r.Message
			t.add(fired)
		}
	}
	if p.AwaitsApproval() {
		waiting := at(promotionv1alpha1.EventPromotionAwaitingApproval, p.CreationTimestamp, "AwaitingApproval")
		waiting.Phase, waiting.Message = string(p.Status.Phase), p.Status.Message
		t.add(waiting)
	}
	if s := p.Status.StartTime; s != nil {
		t.add(at(promotionv1alpha1.EventPromotionStarted, *s, "started"))
	}
	if ro := p.Status.Rollout; ro != nil {
		// Its halts (by its failure budget, or by a person), and who
		// resumed or aborted it, as the promotion acted on it.
		for i, h := range ro.Halts {
			m := at(promotionv1alpha1.EventRolloutHalted, h.Time, fmt.Sprintf("halted/%d", i+1))
			m.By, m.Phase, m.Message = h.By, string(promotionv1alpha1.Halt), h.Reason
			t.add(m)
		}
		for _, in := range ro.Interventions {
			event := map[promotionv1alpha1.InterventionAction]string{
				promotionv1alpha1.Resume: promotionv1alpha1.EventRolloutResumed,
				promotionv1alpha1.Abort:  promotionv1alpha1.EventRolloutAborted,
			}[in.Action]
			if event == "" {
				continue // a halt is among the halts
			}
			m := at(event, in.Time, "intervention/"+in.Intervention)
			m.By, m.Phase, m.Message = in.User, string(in.Action), in.Reason
			t.add(m)
		}
	}
	if !p.Status.Phase.IsFinished() {
		return
	}
	ended := p.CreationTimestamp
	if p.Status.EndTime != nil {
		ended = *p.Status.EndTime
	}
	// The key of the end names its phase: a notification keyed so stays
	// delivered once (as it was before the timeline was one).
	end := at(promotionv1alpha1.EventPromotionFinished, ended, string(p.Status.Phase))
	end.Phase, end.Message = string(p.Status.Phase), p.Status.Message
	t.add(end)
	if p.Status.Phase == promotionv1alpha1.PromotionSucceeded && p.Spec.Rollback {
		back := at(promotionv1alpha1.EventRolledBack, ended, "RolledBack")
		back.Phase, back.Message = end.Phase, end.Message
		t.add(back)
	}
	if v := p.Status.Verification; v != nil && v.Phase == "Failed" {
		failed := at(promotionv1alpha1.EventVerificationFailed, ended, "VerificationFailed")
		failed.Phase, failed.Message = end.Phase, end.Message
		t.add(failed)
	}
}

// approval adds an Approval's decision, whether it counted or not.
func (t *timeline) approval(a *promotionv1alpha1.Approval) {
	spec := a.Spec
	m := Moment{
		Time: a.CreationTimestamp, Event: promotionv1alpha1.EventApprovalGiven, Stage: spec.Stage, Promotion: spec.Promotion,
		By: spec.User, Groups: spec.Groups, Phase: string(spec.Decision), Message: spec.Comment,
		Key: "approval/" + string(a.UID), Namespace: a.Namespace, Kind: "Approval", Name: a.Name,
	}
	if spec.Decision == promotionv1alpha1.Reject {
		m.Event = promotionv1alpha1.EventApprovalRejected
	}
	if s := t.stages[spec.Stage]; s != nil {
		m.Pipeline = s.Spec.Pipeline
	}
	if p := t.promotions[spec.Promotion]; p != nil {
		of := t.ofPromotion(p)
		m.Release, m.Commit, m.Rollback = of.Release, p.Status.Commit, of.Rollback
		m.Pipeline = cmp.Or(m.Pipeline, of.Pipeline)
	}
	t.add(m)
}

// stack adds what a Stack's status says holds now: a stall, drift.
func (t *timeline) stack(s *pulumiv1.Stack) {
	base := Moment{Namespace: s.Namespace, Kind: "Stack", Name: s.Name}
	if stage := t.stackStage[s.Name]; stage != nil {
		base.Stage, base.Pipeline = stage.Name, stage.Spec.Pipeline
	}
	if s.Status.LastUpdate != nil {
		base.Commit = s.Status.LastUpdate.LastSuccessfulCommit
	}
	if sreconcile.IsStalled(s.Status.Conditions) {
		c := apimeta.FindStatusCondition(s.Status.Conditions, sreconcile.StalledCondition)
		m := base
		m.Event, m.Phase, m.Message, m.Time = promotionv1alpha1.EventStackStalled, "Stalled", c.Message, c.LastTransitionTime
		m.Key = "stack/" + string(s.UID) + "/stalled/" + strconv.FormatInt(s.Generation, 10)
		t.add(m)
	}
	if d := s.Status.LastDriftCheck; d != nil && d.Drifted && !d.Failed {
		m := base
		m.Event, m.Phase, m.Message, m.Time = promotionv1alpha1.EventDriftDetected, "Drifted", d.Message, d.Time
		m.Key = "stack/" + string(s.UID) + "/drift/" + d.Name
		t.add(m)
	}
}

// eventOrder orders events of the same second as they happen; events
// outside the audit trail come after it.
func eventOrder(event string) int {
	if i := slices.Index(AuditEvents, event); i >= 0 {
		return i
	}
	return len(AuditEvents)
}
