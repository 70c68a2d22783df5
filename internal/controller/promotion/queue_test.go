package promotion

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func promotionAt(name string, created time.Duration, phase promotionv1alpha1.PromotionPhase) promotionv1alpha1.Promotion {
	p := promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created))}}
	p.Status.Phase = phase
	return p
}

func TestQueue(t *testing.T) {
	const (
		pending  = promotionv1alpha1.PromotionPending
		running  = promotionv1alpha1.PromotionRunning
		finished = promotionv1alpha1.PromotionSucceeded
	)
	tests := []struct {
		name       string
		self       string
		all        []promotionv1alpha1.Promotion
		superseded string
		waitFor    string
	}{
		{name: "alone", self: "a", all: []promotionv1alpha1.Promotion{promotionAt("a", 0, pending)}},
		{name: "the newest runs", self: "b", all: []promotionv1alpha1.Promotion{promotionAt("a", 0, pending), promotionAt("b", time.Second, pending)}},
		{name: "an older one is superseded by the newest", self: "a",
			all:        []promotionv1alpha1.Promotion{promotionAt("a", 0, pending), promotionAt("c", 2*time.Second, pending), promotionAt("b", time.Second, pending)},
			superseded: "c"},
		{name: "same second: the name decides", self: "a", all: []promotionv1alpha1.Promotion{promotionAt("a", 0, pending), promotionAt("b", 0, "")}, superseded: "b"},
		{name: "the newest waits for the running one", self: "b",
			all:     []promotionv1alpha1.Promotion{promotionAt("a", 0, running), promotionAt("b", time.Second, pending)},
			waitFor: "a"},
		{name: "a running one is never superseded, a newer running one not either", self: "a",
			all: []promotionv1alpha1.Promotion{promotionAt("a", time.Minute, pending), promotionAt("b", time.Hour, running)}, waitFor: "b"},
		{name: "finished ones do not count", self: "a",
			all: []promotionv1alpha1.Promotion{promotionAt("a", 0, pending), promotionAt("z", time.Hour, finished), promotionAt("y", time.Hour, promotionv1alpha1.PromotionAborted)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var self *promotionv1alpha1.Promotion
			for i := range tt.all {
				if tt.all[i].Name == tt.self {
					self = &tt.all[i]
				}
			}
			got := Queue(self, tt.all)
			if got.SupersededBy != tt.superseded || got.WaitFor != tt.waitFor {
				t.Errorf("Queue = %+v, want superseded by %q, wait for %q", got, tt.superseded, tt.waitFor)
			}
		})
	}
}

func TestExpired(t *testing.T) {
	all := []promotionv1alpha1.Promotion{
		promotionAt("p1", 1*time.Minute, promotionv1alpha1.PromotionSucceeded),
		promotionAt("p2", 2*time.Minute, promotionv1alpha1.PromotionFailed),
		promotionAt("p3", 3*time.Minute, promotionv1alpha1.PromotionAborted),
		promotionAt("p4", 4*time.Minute, promotionv1alpha1.PromotionRunning), // as stored
		promotionAt("p5", 5*time.Minute, promotionv1alpha1.PromotionPending),
	}
	self := promotionAt("p4", 4*time.Minute, promotionv1alpha1.PromotionSucceeded) // just finished
	names := func(ps []promotionv1alpha1.Promotion) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return strings.Join(out, " ")
	}
	if got := names(Expired(&self, all, 2)); got != "p2 p1" {
		t.Errorf("keeping 2: deleted %q, want p2 p1", got)
	}
	if got := names(Expired(&self, all, 10)); got != "" {
		t.Errorf("keeping 10: deleted %q", got)
	}
	running := all[3]
	if got := names(Expired(&running, all, 1)); got != "p2 p1" {
		t.Errorf("a running promotion collecting: deleted %q, want p2 p1", got)
	}
}

func TestObserve(t *testing.T) {
	const sha, old = "1111111111111111111111111111111111111111", "0000000000000000000000000000000000000000"
	cond := func(typ, msg string, generation int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R", Message: msg, ObservedGeneration: generation}
	}
	stack := func(commit string, generation, observed int64, lu *shared.StackUpdateState, conds ...metav1.Condition) *pulumiv1.Stack {
		s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: generation}}
		s.Spec.GitSource = &shared.GitSource{ProjectRepo: "https://git.example/web.git", Commit: commit}
		s.Status.ObservedGeneration, s.Status.LastUpdate, s.Status.Conditions = observed, lu, conds
		return s
	}
	withHistory := func(s *pulumiv1.Stack, name, reason string) *pulumiv1.Stack {
		s.Status.History = []shared.UpdateRecord{{Name: name, Reason: reason}}
		return s
	}
	withRequest := func(s *pulumiv1.Stack, handled string) *pulumiv1.Stack {
		s.Status.ObservedReconcileRequest = handled
		return s
	}
	ranFor := func(lu *shared.StackUpdateState, request string) *shared.StackUpdateState {
		lu = lu.DeepCopy()
		lu.ReconcileRequest = request
		return lu
	}
	succeeded := &shared.StackUpdateState{Name: "web-up-2", Generation: 2, State: shared.SucceededStackStateMessage, LastAttemptedCommit: sha, LastSuccessfulCommit: sha, Message: "ok"}
	failedHere := &shared.StackUpdateState{Name: "web-up-2", Generation: 2, State: shared.FailedStackStateMessage, LastAttemptedCommit: sha, LastSuccessfulCommit: old, Message: "boom"}
	failedBefore := &shared.StackUpdateState{Name: "web-up-1", Generation: 1, State: shared.FailedStackStateMessage, LastAttemptedCommit: old, Message: "old"}
	tests := []struct {
		name    string
		stack   *pulumiv1.Stack
		request string
		want    StackState
		msg     string
	}{
		{name: "the pin not seen yet", stack: stack(old, 1, 1, nil, cond("Ready", "ok", 1)), want: StackDeploying, msg: "pin"},
		{name: "ready at the commit", stack: stack(sha, 2, 2, succeeded, cond("Ready", "ok", 2)), want: StackDeployed, msg: "ok"},
		{name: "ready, but for the previous generation", stack: stack(sha, 2, 1, failedBefore, cond("Ready", "ok", 1)), want: StackDeploying, msg: "generation 2"},
		{name: "updating", stack: stack(sha, 2, 1, failedBefore, cond("Reconciling", "running web-up-2", 2)), want: StackDeploying, msg: "running web-up-2"},
		{name: "the update of the commit failed", stack: stack(sha, 2, 1, failedHere, cond("Reconciling", "retrying", 2)), want: StackFailed, msg: "update web-up-2 failed: boom"},
		{name: "the update of the commit was interrupted", stack: withHistory(stack(sha, 2, 1, failedHere, cond("Reconciling", "retrying", 2)), "web-up-2", autov1alpha1.UpdateReasonInterrupted),
			want: StackDeploying, msg: "web-up-2 ended Interrupted; the Stack runs it again"},
		{name: "the update of the commit failed, as history says", stack: withHistory(stack(sha, 2, 1, failedHere, cond("Reconciling", "retrying", 2)), "web-up-2", autov1alpha1.UpdateReasonFailed),
			want: StackFailed, msg: "update web-up-2 failed: boom"},
		{name: "an update conflict, not retried", stack: withHistory(stack(sha, 2, 1, failedHere, cond("Reconciling", "retrying", 2)), "web-up-2", autov1alpha1.UpdateReasonConflict),
			want: StackFailed, msg: "update web-up-2 failed: boom"},
		{name: "stalled before the pin does not count", stack: stack(sha, 2, 1, failedBefore, cond("Stalled", "3 updates failed", 1)), want: StackDeploying},
		{name: "stalled for this generation", stack: stack(sha, 2, 2, failedBefore, cond("Stalled", "no source", 2)), want: StackFailed, msg: "stalled: no source"},
		// A pin that changed only annotations: the generation is the
		// one the previous promotion failed in.
		{name: "stalled before the promotion's request was handled", request: "promotion/b/2", stack: withRequest(stack(sha, 2, 2, failedHere, cond("Stalled", "3 updates failed", 2)), "promotion/a/1"),
			want: StackDeploying, msg: "reconcile request"},
		{name: "stalled after the promotion's request", request: "promotion/b/2", stack: withRequest(stack(sha, 2, 2, failedHere, cond("Stalled", "3 updates failed", 2)), "promotion/b/2"),
			want: StackFailed, msg: "stalled: 3 updates failed"},
		{name: "failed for another request", request: "promotion/b/2", stack: withRequest(stack(sha, 2, 2, failedHere, cond("Reconciling", "running", 2)), "promotion/b/2"),
			want: StackDeploying, msg: "running"},
		{name: "ready at the commit for another request", request: "promotion/b/2", stack: withRequest(stack(sha, 2, 2, succeeded, cond("Ready", "ok", 2)), ""),
			want: StackDeploying, msg: "reconcile request"},
		{name: "ready at the commit for the request", request: "promotion/b/2", stack: withRequest(stack(sha, 2, 2, ranFor(succeeded, "promotion/b/2"), cond("Ready", "ok", 2)), "promotion/b/2"),
			want: StackDeployed, msg: "ok"},
		{name: "failed for the request", request: "promotion/b/2", stack: withRequest(stack(sha, 2, 2, ranFor(failedHere, "promotion/b/2"), cond("Reconciling", "retrying", 2)), "promotion/b/2"),
			want: StackFailed, msg: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := Observe(tt.stack, sha, tt.request)
			if got != tt.want || !strings.Contains(msg, tt.msg) {
				t.Errorf("Observe = %v %q, want %v %q", got, msg, tt.want, tt.msg)
			}
		})
	}
}

func TestPinnable(t *testing.T) {
	git := func(commit, branch string) *pulumiv1.Stack {
		s := &pulumiv1.Stack{}
		s.Spec.GitSource = &shared.GitSource{ProjectRepo: "https://git.example/web.git", Commit: commit, Branch: branch}
		return s
	}
	program := &pulumiv1.Stack{}
	program.Spec.ProgramRef = &shared.ProgramReference{Name: "site"}
	tests := []struct {
		name  string
		stack *pulumiv1.Stack
		want  string
	}{
		{name: "pinned", stack: git("abc", "")},
		{name: "no commit yet", stack: git("", "")},
		{name: "missing", want: `Stack "web" not found`},
		{name: "a branch", stack: git("", "main"), want: `Stack "web" tracks spec.branch "main"`},
		{name: "a Program", stack: program, want: "not supported yet"},
		{name: "no source", stack: &pulumiv1.Stack{}, want: "no git source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pinnable("web", tt.stack)
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("pinnable = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCollects: only a promotion that finished lately collects its
// stage's old records; those reconciled again at a restart do not.
func TestCollects(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(phase promotionv1alpha1.PromotionPhase, ago time.Duration, recorded bool) *promotionv1alpha1.Promotion {
		p := &promotionv1alpha1.Promotion{}
		p.Status.Phase = phase
		if recorded {
			p.Status.EndTime = &metav1.Time{Time: now.Add(-ago)}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *promotionv1alpha1.Promotion
		want bool
	}{
		{"running", at(promotionv1alpha1.PromotionRunning, 0, false), false},
		{"just succeeded", at(promotionv1alpha1.PromotionSucceeded, time.Second, true), true},
		{"failed nine minutes ago", at(promotionv1alpha1.PromotionFailed, 9*time.Minute, true), true},
		{"succeeded an hour ago", at(promotionv1alpha1.PromotionSucceeded, time.Hour, true), false},
		{"finished, no end time", at(promotionv1alpha1.PromotionAborted, 0, false), true},
	} {
		if got := collects(tc.p, now); got != tc.want {
			t.Errorf("%s: collects = %v, want %v", tc.name, got, tc.want)
		}
	}
}
