package promotion

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestHeldSince: a promotion fails a Stack whose spec changed after it
// started, and that holds the change, and only that Stack.
func TestHeldSince(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(start.Add(d)) }
	for _, tt := range []struct {
		name  string
		held  *shared.HeldSpec
		start *metav1.Time
		fails bool
	}{
		{name: "nothing held", start: &start},
		{name: "a change held before the start, which the promotion previewed", start: &start,
			held: &shared.HeldSpec{Generation: 4, Since: at(-time.Minute)}},
		{name: "a change held after the start", start: &start, held: &shared.HeldSpec{Generation: 4, Since: at(time.Second)}, fails: true},
		{name: "a change held in the second the promotion started", start: &start, held: &shared.HeldSpec{Generation: 4, Since: at(0)}, fails: true},
		{name: "a held generation the Stack has moved past", start: &start, held: &shared.HeldSpec{Generation: 3, Since: at(time.Second)}},
		{name: "a promotion not started", held: &shared.HeldSpec{Generation: 4, Since: at(time.Second)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 4}}
			stack.Status.HeldSpec = tt.held
			msg := heldSince(stack, tt.start)
			if (msg != "") != tt.fails {
				t.Fatalf("heldSince = %q, want a failure: %v", msg, tt.fails)
			}
			if tt.fails && !strings.Contains(msg, "generation 4") {
				t.Errorf("heldSince = %q; want it to name the held generation", msg)
			}
		})
	}
}
