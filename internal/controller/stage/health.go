package stage

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileHealth reads the bound Stacks and sums up their kstatus
// conditions in status.health.
func (s *session) reconcileHealth(ctx context.Context) (sreconcile.Result, error) {
	s.stacks, s.stackErrs = map[string]*pulumiv1.Stack{}, map[string]error{}
	for _, b := range s.stage.Spec.Stacks {
		var stack pulumiv1.Stack
		err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stage.Namespace, Name: b.Name}, &stack)
		switch {
		case err == nil:
			s.stacks[b.Name] = &stack
		case apierrors.IsNotFound(err):
			s.stackErrs[b.Name] = err
		default:
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("reading Stack %q: %w", b.Name, err))
		}
	}
	h := change.Health(s.stage.Spec.Stacks, s.stacks)
	s.stage.Status.Health = &h
	return sreconcile.ResultEmpty, nil
}
