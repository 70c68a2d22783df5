package promotion

import (
	"context"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

// The digest reads the Secrets and ConfigMaps the Stacks reference, for
// their resourceVersion only.
//
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get

// planDigest identifies what the promotion would apply: a sha256 over its
// inputs, in order. They are the release's commit and, for each Stack of
// the stage, its inputs (change.StackInputs: its whole spec but the commit,
// and the resourceVersion of every Secret and ConfigMap it reads, a
// missing one counting as such). Any change of an input gives a new digest, so an
// approval given for the old one no longer counts. Stacks, Secrets and
// ConfigMaps are read live, not from the cache. The previews' plans are
// inputs too (planInputs, plan.go): the digest of each plan the Stacks
// will be held to, so a new preview makes older approvals stop counting.
func (s *session) planDigest(ctx context.Context) (string, error) {
	inputs := []change.Input{{Name: "release", Value: s.release.Spec.Commit.SHA}}
	for _, b := range s.targets() {
		stack, err := get(ctx, s.r.APIReader, s.p.Namespace, "Stack", b.Name, &pulumiv1.Stack{})
		if err != nil {
			return "", err
		}
		if stack == nil {
			inputs = append(inputs, change.Input{Name: "Stack/" + b.Name})
			continue
		}
		own, err := change.StackInputs(ctx, s.r.APIReader, stack)
		if err != nil {
			return "", err
		}
		inputs = append(inputs, own...)
	}
	plans, err := s.planInputs(ctx)
	if err != nil {
		return "", err
	}
	return change.Digest(append(inputs, plans...))
}
