package change

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

func stack(name string, generation, observed int64, conds ...metav1.Condition) *pulumiv1.Stack {
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation}}
	s.Status.ObservedGeneration, s.Status.Conditions = observed, conds
	return s
}

func cond(typ, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}

func TestHealth(t *testing.T) {
	bindings := []promotionv1alpha1.StackBinding{{Name: "web"}, {Name: "db"}}
	readyStack := func(name string) *pulumiv1.Stack {
		return stack(name, 2, 2, cond("Ready", "ProcessingCompleted", "ok"))
	}
	tests := []struct {
		name   string
		stacks map[string]*pulumiv1.Stack
		want   promotionv1alpha1.StageHealthStatus
		msg    string
	}{
		{name: "all ready", stacks: map[string]*pulumiv1.Stack{"web": readyStack("web"), "db": readyStack("db")}, want: promotionv1alpha1.Healthy},
		{name: "one missing", stacks: map[string]*pulumiv1.Stack{"web": readyStack("web")}, want: promotionv1alpha1.Degraded, msg: "Stack db: not found"},
		{name: "one reconciling", want: promotionv1alpha1.Progressing, msg: "Stack web: running update",
			stacks: map[string]*pulumiv1.Stack{"web": stack("web", 2, 1, cond("Reconciling", "StackProcessing", "running update")), "db": readyStack("db")}},
		{name: "a new generation not handled yet", want: promotionv1alpha1.Progressing, msg: "Stack db: waiting for the operator to handle generation 3",
			stacks: map[string]*pulumiv1.Stack{"web": readyStack("web"), "db": stack("db", 3, 2, cond("Ready", "ProcessingCompleted", "ok"))}},
		{name: "stalled beats progressing", want: promotionv1alpha1.Degraded, msg: "Stack db: 3 updates failed",
			stacks: map[string]*pulumiv1.Stack{"web": stack("web", 2, 1, cond("Reconciling", "StackProcessing", "x")), "db": stack("db", 1, 1, cond("Stalled", "UpdateFailed", "3 updates failed"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Health(bindings, tt.stacks)
			if h.Status != tt.want || !strings.Contains(h.Message, tt.msg) {
				t.Errorf("Health = %s %q, want %s %q", h.Status, h.Message, tt.want, tt.msg)
			}
		})
	}
}
