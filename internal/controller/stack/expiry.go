package stack

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// EventExpired: the Stack's spec.ttl ran out, and the operator deletes it.
const EventExpired = "Expired"

// TTL stacks: a Stack with spec.ttl lives that long from its creation.
// Both ends of the count are the API server's records, not claims: the
// creation time it set, and, for the destroy, the deletion time it set
// (expiredAt). Whoever may edit the Stack may set its TTL, as they may set
// destroyOnFinalize and delete it: the TTL gives nobody more than that. A
// governed Stack cannot have one (config/policy/stack-governance.yaml,
// and reconcileExpiry stalls one made before that rule), so a change to
// its spec never destroys what its stage deploys.
//
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=delete

// expired reports whether a Stack being deleted was deleted once its TTL
// had run out: its resources are then destroyed before it goes, whatever
// destroyOnFinalize says, however it was deleted. A governed Stack never
// expires, not even one that got a TTL before the admission policy
// refused it.
func expired(stack *pulumiv1.Stack) bool {
	return stack.DeletedExpired() && change.AuthorizedStage(stack.Annotations) == ""
}

// reconcileExpiry records when the Stack's TTL runs out (status.expiresAt)
// and, once it has, deletes the Stack: its finalizer then destroys the
// stack's resources before the Stack goes (reconcileDelete). It runs after
// reconcileHold, so it never acts on a TTL nobody approved. finish makes
// sure the Stack is looked at again when its TTL runs out.
func (s *session) reconcileExpiry(ctx context.Context) (sreconcile.Result, error) {
	st := &s.stack.Status
	at := s.stack.ExpiresAt()
	if at.IsZero() {
		st.ExpiresAt = nil
		return sreconcile.ResultEmpty, nil
	}
	if stage := change.AuthorizedStage(s.stack.Annotations); stage != "" {
		st.ExpiresAt = nil
		return sreconcile.ResultEmpty, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason, fmt.Errorf(
			"spec.ttl: Stack %s is governed by stage %s, whose promotions alone decide what it deploys, so it cannot expire: remove spec.ttl",
			s.stack.Name, stage))
	}
	stamp := metav1.NewTime(at)
	st.ExpiresAt = &stamp
	if s.now.Before(at) {
		return sreconcile.ResultEmpty, nil
	}
	uid, version := s.stack.UID, s.stack.ResourceVersion
	err := s.r.Client.Delete(ctx, s.stack, client.Preconditions{UID: &uid, ResourceVersion: &version})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// Changed or gone since this copy was read: the next reconcile
		// decides on what is stored (a TTL lengthened meanwhile counts).
		return sreconcile.ResultRequeue, nil
	case err != nil:
		return sreconcile.ResultEmpty, failed(pulumiv1.StackDeleteFailedReason, fmt.Sprintf("deleting the Stack, whose spec.ttl ran out at %s", at.UTC().Format(time.RFC3339)), err)
	}
	s.event(corev1.EventTypeNormal, EventExpired, fmt.Sprintf("spec.ttl (%s) ran out at %s: deleting the Stack, and destroying its resources first",
		s.stack.Spec.TTL.Duration, at.UTC().Format(time.RFC3339)))
	return sreconcile.ResultEmpty, sreconcile.NewWaiting(pulumiv1.ReconcilingExpiredReason, fmt.Errorf(
		"spec.ttl ran out at %s: the Stack is deleted, its resources destroyed first", at.UTC().Format(time.RFC3339)), requeueSoon)
}

// untilExpiry caps the wait before the next reconcile of a Stack with a
// TTL at the time it runs out, so that it expires on time whatever else it
// waits for.
func (s *session) untilExpiry(after time.Duration) time.Duration {
	at := s.stack.Status.ExpiresAt
	if at == nil || !s.stack.DeletionTimestamp.IsZero() {
		return after
	}
	left := max(at.Sub(s.now), requeueSoon)
	if after <= 0 || left < after {
		return left
	}
	return after
}
