package stack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// TestExpired: a Stack is destroyed for its TTL only when the API server
// deleted it once the TTL had run out, counted from its creation.
func TestExpired(t *testing.T) {
	created := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for name, tt := range map[string]struct {
		ttl     time.Duration
		deleted time.Time
		want    bool
	}{
		"no TTL":                    {0, created.Add(time.Hour), false},
		"not deleted":               {time.Minute, time.Time{}, false},
		"deleted before it ran out": {time.Hour, created.Add(59 * time.Minute), false},
		"deleted as it ran out":     {time.Hour, created.Add(time.Hour), true},
		"deleted after":             {time.Hour, created.Add(2 * time.Hour), true},
		"governed":                  {time.Hour, created.Add(2 * time.Hour), false},
	} {
		stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		if name == "governed" {
			stack.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}
		}
		if tt.ttl > 0 {
			stack.Spec.TTL = &metav1.Duration{Duration: tt.ttl}
		}
		if !tt.deleted.IsZero() {
			stack.DeletionTimestamp = &metav1.Time{Time: tt.deleted}
		}
		if got := expired(stack); got != tt.want {
			t.Errorf("%s: expired = %v, want %v", name, got, tt.want)
		}
	}
}

// TestUntilExpiry: the next look at a Stack with a TTL comes no later than
// the time it runs out.
func TestUntilExpiry(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now.Add(10 * time.Minute))
	for name, tt := range map[string]struct {
		expiresAt *metav1.Time
		after     time.Duration
		want      time.Duration
	}{
		"no TTL, no requeue":         {nil, 0, 0},
		"no TTL":                     {nil, time.Hour, time.Hour},
		"no requeue":                 {&at, 0, 10 * time.Minute},
		"a later requeue":            {&at, time.Hour, 10 * time.Minute},
		"an earlier requeue":         {&at, time.Minute, time.Minute},
		"ran out: soon, not at once": {&metav1.Time{Time: now.Add(-time.Hour)}, time.Hour, requeueSoon},
	} {
		s := &session{stack: &pulumiv1.Stack{Status: pulumiv1.StackStatus{ExpiresAt: tt.expiresAt}}, now: now}
		if got := s.untilExpiry(tt.after); got != tt.want {
			t.Errorf("%s: untilExpiry(%s) = %s, want %s", name, tt.after, got, tt.want)
		}
	}
}

// TestGovernedStackDoesNotExpire: a governed Stack with a TTL (made before
// the admission policy refused one) stalls, naming the field, and is not
// deleted.
func TestGovernedStackDoesNotExpire(t *testing.T) {
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web-prod",
		CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
		Annotations:       map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}}}
	stack.Spec.TTL = &metav1.Duration{Duration: time.Minute}
	s := &session{r: &Reconciler{}, stack: stack, now: time.Now()}
	_, err := s.reconcileExpiry(context.Background())
	var stall *sreconcile.Stalling
	if !errors.As(err, &stall) || sreconcile.Reason(err) != pulumiv1.StalledSpecInvalidReason {
		t.Fatalf("reconcileExpiry = %v, want a SpecInvalid stall", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "spec.ttl") || !strings.Contains(msg, "stage prod") {
		t.Errorf("the stall %q does not name the field and the stage", msg)
	}
	if stack.Status.ExpiresAt != nil {
		t.Errorf("status.expiresAt %v set for a Stack that does not expire", stack.Status.ExpiresAt)
	}
}
