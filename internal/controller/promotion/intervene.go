package promotion

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=interventions,verbs=get;list;watch

// maxInterventions is the most Interventions status.rollout records.
const maxInterventions = 32

// reconcileInterventions acts, while the promotion runs, on the
// Interventions that name it and its stage and that it has not acted on
// yet, oldest first: Halt halts the rollout, Resume ends a halt, Abort
// makes it pin no more Stacks and end once those updating finished. Each
// is recorded in status.rollout.interventions (who, what, when) and told
// by an event. The user is the one the API server authenticated
// (config/policy), with the verb operate on the stage.
func (s *session) reconcileInterventions(ctx context.Context) (sreconcile.Result, error) {
	if !s.running() {
		return sreconcile.ResultEmpty, nil
	}
	var list promotionv1alpha1.InterventionList
	if err := s.r.Client.List(ctx, &list, client.InNamespace(s.p.Namespace)); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("listing Interventions: %w", err))
	}
	items := make([]promotionv1alpha1.Intervention, 0)
	for _, in := range list.Items {
		if in.Spec.Promotion == s.p.Name && in.Spec.Stage == s.p.Spec.Stage && in.DeletionTimestamp.IsZero() &&
			!in.CreationTimestamp.Before(&s.p.CreationTimestamp) {
			items = append(items, in)
		}
	}
	sort.Slice(items, func(i, j int) bool { return after(&items[j], cursorOf(&items[i])) })
	if len(items) == 0 {
		return sreconcile.ResultEmpty, nil
	}
	ro := s.ensureRolloutStatus()
	for _, in := range items {
		if c := ro.LastIntervention; c != nil && !after(&in, c) {
			continue
		}
		ro.LastIntervention = cursorOf(&in)
		who, why := in.Spec.User, reasonSuffix(in.Spec.Reason)
		switch in.Spec.Action {
		case promotionv1alpha1.Halt:
			s.halt(haltPerson, fmt.Sprintf("halted by %s%s", who, why), who)
		case promotionv1alpha1.Resume:
			ro.Halted = ""
			s.event(corev1.EventTypeNormal, promotionv1alpha1.EventRolloutResumed, fmt.Sprintf("rollout of release %s into stage %s resumed by %s%s", s.p.Spec.Release, s.p.Spec.Stage, who, why))
		case promotionv1alpha1.Abort:
			// Acted on by advanceRollout, from the record.
		default:
			continue
		}
		ro.Interventions = append(ro.Interventions, promotionv1alpha1.InterventionRecord{
			Intervention: in.Name, Action: in.Spec.Action, User: who,
			Reason: sreconcile.Truncate(in.Spec.Reason, 1024), Time: metav1.NewTime(s.now),
		})
		if n := len(ro.Interventions); n > maxInterventions {
			// The newest are kept; an abort is remembered apart.
			ro.Interventions = ro.Interventions[n-maxInterventions:]
		}
		if in.Spec.Action == promotionv1alpha1.Abort && ro.Aborted == nil {
			rec := ro.Interventions[len(ro.Interventions)-1]
			ro.Aborted = &rec
		}
	}
	return sreconcile.ResultEmpty, nil
}

// cursorOf names in, for after.
func cursorOf(in *promotionv1alpha1.Intervention) *promotionv1alpha1.InterventionCursor {
	return &promotionv1alpha1.InterventionCursor{Name: in.Name, Created: in.CreationTimestamp}
}

// after reports whether in was created after the Intervention c names: by
// creation time, then (within a second) by name.
func after(in *promotionv1alpha1.Intervention, c *promotionv1alpha1.InterventionCursor) bool {
	if !in.CreationTimestamp.Equal(&c.Created) {
		return c.Created.Before(&in.CreationTimestamp)
	}
	return in.Name > c.Name
}

// ensureRolloutStatus is status.rollout, made for a promotion whose stage
// has no rollout (one wave) when an Intervention needs a record.
func (s *session) ensureRolloutStatus() *promotionv1alpha1.RolloutStatus {
	if s.p.Status.Rollout == nil {
		s.p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Waves: 1, Wave: 1, WaveStartTime: s.p.Status.StartTime}
	}
	return s.p.Status.Rollout
}

// aborting reports whether an Intervention aborted the promotion.
func (s *session) aborting() (promotionv1alpha1.InterventionRecord, bool) {
	if ro := s.p.Status.Rollout; ro != nil && ro.Aborted != nil {
		return *ro.Aborted, true
	}
	return promotionv1alpha1.InterventionRecord{}, false
}

// promotionOfIntervention maps an Intervention to the Promotion it names.
func promotionOfIntervention(_ context.Context, obj client.Object) []ctrlreconcile.Request {
	in, ok := obj.(*promotionv1alpha1.Intervention)
	if !ok || in.Spec.Promotion == "" {
		return nil
	}
	return []ctrlreconcile.Request{{NamespacedName: types.NamespacedName{Namespace: in.Namespace, Name: in.Spec.Promotion}}}
}
