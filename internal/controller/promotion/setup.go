package promotion

import (
	"cmp"
	"context"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

// StackIndex indexes the Promotions that have not finished by the Stacks
// they record, so that a Stack's change wakes the promotion that follows
// it.
const StackIndex = "promotion.status.stacks.name"

// SetupWithManager registers the reconciler, with Workers workers (one
// per stage at a time; see Reconciler), and what wakes a Promotion: its creation; a change of phase
// (or the deletion) of another promotion of its stage, for the queue; a
// change of its Stage (a freeze lifted, windows changed); while it runs, a
// change of one of its Stacks; a change of the preview Workspaces and
// Updates and the verification Jobs it owns; and the end of one of its
// HTTP measurements. The deletion of a Promotion leaves an event on its
// Stage, that of an Approval on its Promotion. change.SetupIndexes must
// have run.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &promotionv1alpha1.Promotion{}, StackIndex, unfinishedStacks)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("promotion").
		For(&promotionv1alpha1.Promotion{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&promotionv1alpha1.Promotion{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
			return r.unfinished(ctx, obj.GetNamespace(), change.PromotionStageIndex, obj.(*promotionv1alpha1.Promotion).Spec.Stage)
		}), builder.WithPredicates(phaseChanged())).
		Watches(&promotionv1alpha1.Stage{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
			return r.unfinished(ctx, obj.GetNamespace(), change.PromotionStageIndex, obj.GetName())
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
			return r.unfinished(ctx, obj.GetNamespace(), StackIndex, obj.GetName())
		})).
		Watches(&promotionv1alpha1.Approval{}, handler.EnqueueRequestsFromMapFunc(promotionOfApproval)).
		Watches(&promotionv1alpha1.Intervention{}, handler.EnqueueRequestsFromMapFunc(promotionOfIntervention)).
		Watches(&promotionv1alpha1.Promotion{}, sreconcile.RecordDeletions(r.Recorder, r.promotionDeleted)).
		Watches(&promotionv1alpha1.Approval{}, sreconcile.RecordDeletions(r.Recorder, r.approvalDeleted)).
		Owns(&autov1alpha1.Workspace{}).
		Owns(&autov1alpha1.Update{}).
		Owns(&batchv1.Job{}).
		WatchesRawSource(source.Channel(r.prober().wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultWorkers)}).
		Complete(r)
}

// phaseChanged passes the creation and deletion of a Promotion and the
// updates that change its phase.
func phaseChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*promotionv1alpha1.Promotion)
			cur, okNew := e.ObjectNew.(*promotionv1alpha1.Promotion)
			return !okOld || !okNew || old.Status.Phase != cur.Status.Phase
		},
	}
}

// unfinished lists the Promotions of namespace that have not finished and
// whose index holds value.
func (r *Reconciler) unfinished(ctx context.Context, namespace, index, value string) []ctrlreconcile.Request {
	var list promotionv1alpha1.PromotionList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		log.FromContext(ctx).Error(err, "listing promotions", "index", index, "value", value)
		return nil
	}
	var reqs []ctrlreconcile.Request
	for _, p := range list.Items {
		if !p.Status.Phase.IsFinished() {
			reqs = append(reqs, ctrlreconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return reqs
}

// The operator writes the records of change management, which the
// admission policies in config/policy (records.yaml, stack-governance.yaml)
// accept only from a caller allowed the verb "record": Releases, the status
// of Promotions, Stages and Stacks, retention's deletions, and the pins of
// governed Stacks.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=releases;promotions;stackpromotions;stages;approvals,verbs=record
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=record

// unfinishedStacks is the value of StackIndex for a Promotion: the Stacks
// its status records while it has not finished, nothing after.
func unfinishedStacks(obj client.Object) []string {
	p, ok := obj.(*promotionv1alpha1.Promotion)
	if !ok || p.Status.Phase.IsFinished() {
		return nil
	}
	names := make([]string, 0, len(p.Status.Stacks))
	for _, ps := range p.Status.Stacks {
		names = append(names, ps.Name)
	}
	return names
}
