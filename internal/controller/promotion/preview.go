package promotion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// What previews need of the API: the Workspaces and Updates a promotion
// makes (owned by it, so creating them needs the right to set its
// finalizers' owner references).
//
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces;updates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions/finalizers,verbs=update

// Labels on the Workspaces, Updates and plan Secrets a promotion makes to
// preview its Stacks. They carry no pulumi.com/stack-name label: they are
// not the Stack's, and tools listing a Stack's Updates by it must not
// count them.
const (
	// PromotionLabel names the Promotion a preview belongs to (the label
	// Approvals carry too).
	PromotionLabel = promotionv1alpha1.PromotionLabel
	// StackLabel names the Stack it previews.
	StackLabel = promotionv1alpha1.StackLabel
)

// TriggerPromotion is the stackyard.dev/trigger annotation of a preview
// Update a promotion started.
const TriggerPromotion = "PromotionPreview"

// ReasonPreviewing is the reason of the wait of a promotion whose previews
// run.
const ReasonPreviewing = "Previewing"

// previewWait is how long a promotion waits for its previews before it
// looks again by itself; the preview Updates' and Workspaces' changes wake
// it sooner.
const previewWait = time.Minute

// maxPreviewAttempts is how many times a preview is started for one Stack
// when it ends Interrupted (the operator or the agent stopped) or
// UpdateConflict (the stack's lock was held): neither says anything about
// the release, so the preview is run again.
const maxPreviewAttempts = 3

// maxPreviewChanges is the API's limit on a preview's changes.
const maxPreviewChanges = 200

// reconcilePreview previews, while the promotion is Pending and its turn
// has come, every Stack of the stage at the release's commit, before
// anything changes: one Workspace per Stack, built by the Stack
// controller's own builder from the Stack's spec with the source pinned to
// the commit, and one preview Update in it, both owned by the promotion,
// at most maxPreviews at once. It records each preview's outcome in the
// Stack's record (records.go), deletes each preview's Workspace once its
// preview is in (its agent would idle around) and, once all are in, lets
// the chain go on to the approvals and the start. A Stack running an
// update (or with a generation not handled yet) is previewed once it has
// finished: previewed now, the changes would be computed against a state
// about to change. Each preview saves its plan (plan.go). A failed preview
// fails the promotion (and the release in the stage) with nothing changed;
// a preview-only stage's promotion succeeds once its previews did, which
// verifies the release there without pinning anything. A finished
// promotion's leftover previews (one superseded or refused while it
// previewed) are deleted.
func (s *session) reconcilePreview(ctx context.Context) (sreconcile.Result, error) {
	switch {
	case s.p.Status.Phase.IsFinished():
		return sreconcile.ResultEmpty, s.deletePreviews(ctx, true)
	case !s.pending():
		return sreconcile.ResultEmpty, nil
	}
	stacks, done, err := s.previewTargets(ctx)
	if done || err != nil {
		return sreconcile.ResultEmpty, err
	}
	previews := make([]promotionv1alpha1.StackPreview, 0, len(stacks))
	waiting, anyBusy := "", false
	slots, queued := s.previewSlots(stacks), 0
	for _, stack := range stacks {
		pv := s.recordedPreview(stack.Name)
		if pv.Summary == nil && pv.Update == "" && slots == 0 {
			// Its turn comes once a preview running now has ended.
			queued++
			previews = append(previews, pv)
			continue
		}
		if pv.Summary == nil && pv.Update == "" && busy(stack) {
			// Previewed now, the changes would be computed against a
			// state about to change (and a Stack's first update and the
			// preview would both create the stack in the backend).
			if waiting == "" {
				waiting = fmt.Sprintf("waiting for Stack %s to finish its update before previewing", stack.Name)
			}
			anyBusy = true
			previews = append(previews, pv)
			continue
		}
		if pv.Summary == nil {
			if pv.Update == "" {
				slots--
			}
			failure, err := s.runPreview(ctx, stack, &pv)
			switch {
			case err != nil:
				return sreconcile.ResultEmpty, s.keepPreviews(append(previews, pv), err)
			case failure != "":
				return s.failPreview(ctx, pv, failure)
			case pv.Summary != nil:
				// Done: its Workspace's agent would idle until the last
				// preview is in, which in a stage of hundreds is long.
				if err := s.deletePreviewWorkspace(ctx, change.PreviewName(s.p.Name, stack.Name, pv.Round)); err != nil {
					return sreconcile.ResultEmpty, s.keepPreviews(append(previews, pv), err)
				}
			case waiting == "":
				waiting = fmt.Sprintf("previewing Stack %s (Update %s)", stack.Name, pv.Update)
			}
		}
		previews = append(previews, pv)
	}
	s.recs.previews, s.recs.whole = previews, true
	if queued > 0 {
		waiting = fmt.Sprintf("%s; %d more Stacks wait their turn (previewed %d at a time)", cmp.Or(waiting, "previewing"), queued, s.maxPreviews())
	}
	if waiting != "" {
		s.p.Status.Policies = nil // judged again once every preview is in
		// A Stack's change does not wake a Pending promotion: look again
		// soon while one is busy.
		wait := previewWait
		if anyBusy {
			wait = busyWait
		}
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonPreviewing, errors.New(waiting), wait)
	}
	if err := s.deletePreviews(ctx, false); err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.p.Status.Message = "previewed: " + DescribePreviews(previews)
	return sreconcile.ResultEmpty, nil
}

// previewTargets reads the Stacks of the stage, in the stage's order. A
// Stack that cannot be promoted (missing, not consenting to the stage,
// not pinnable) ends the promotion here, as startPromotion would, before
// anything is previewed: done is then true.
func (s *session) previewTargets(ctx context.Context) (stacks []*pulumiv1.Stack, done bool, err error) {
	for _, b := range s.targets() {
		stack, err := get(ctx, s.r.Client, s.p.Namespace, "Stack", b.Name, &pulumiv1.Stack{})
		if err != nil {
			return nil, false, err
		}
		if stack != nil {
			if msg := change.Unconsented(s.stage.Name, s.stage.Spec.PreviewOnly, b.Name, stack.Annotations); msg != "" {
				_, err := s.abort("spec.stage: %s", msg)
				return nil, true, err
			}
		}
		if err := pinnable(b.Name, stack); err != nil {
			s.end(promotionv1alpha1.PromotionFailed, err.Error())
			return nil, true, nil
		}
		stacks = append(stacks, stack)
	}
	return stacks, false, nil
}

// deletePreviewWorkspace deletes the promotion's preview Workspace name,
// once its preview is in; one it does not control is left alone.
func (s *session) deletePreviewWorkspace(ctx context.Context, name string) error {
	ws := &autov1alpha1.Workspace{}
	switch err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: name}, ws); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return sreconcile.NewGeneric("", fmt.Errorf("reading the preview's Workspace %s: %w", name, err))
	case !metav1.IsControlledBy(ws, s.p) || !ws.DeletionTimestamp.IsZero():
		return nil
	}
	uid := ws.UID
	if err := s.r.Client.Delete(ctx, ws, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return sreconcile.NewGeneric("", fmt.Errorf("deleting the preview's Workspace %s: %w", name, err))
	}
	return nil
}

// defaultMaxPreviews is how many Stacks a promotion previews at once
// when its stage does not say (spec.rollout.maxParallelPreviews).
const defaultMaxPreviews = 20

// maxPreviews is how many Stacks the promotion previews at once.
func (s *session) maxPreviews() int {
	if ro := s.stage.Spec.Rollout; ro != nil && ro.MaxParallelPreviews > 0 {
		return int(ro.MaxParallelPreviews)
	}
	return defaultMaxPreviews
}

// previewSlots is how many more previews of stacks may start now: the
// promotion's bound less the previews that run (made, not ended).
func (s *session) previewSlots(stacks []*pulumiv1.Stack) int {
	running := 0
	for _, stack := range stacks {
		if pv := s.recordedPreview(stack.Name); pv.Update != "" && pv.Summary == nil {
			running++
		}
	}
	return max(s.maxPreviews()-running, 0)
}

// busyWait is how long a promotion waits for a Stack that runs an update
// (or has not handled its generation yet) before it looks again.
const busyWait = 5 * time.Second

// busy reports whether stack runs an update, or has not handled its
// current generation yet.
func busy(stack *pulumiv1.Stack) bool {
	return stack.Status.CurrentUpdate != nil || stack.Status.ObservedGeneration != stack.Generation
}

// keepPreviews records done, the previews a reconcile got to before err
// stopped it, and returns err: a record lost here would make their
// previews look like someone else's at the next reconcile.
func (s *session) keepPreviews(done []promotionv1alpha1.StackPreview, err error) error {
	for _, pv := range done {
		s.recs.previews = mergePreview(s.recs.previews, pv)
	}
	return err
}

// mergePreview replaces the entry of pv's Stack in previews, or adds it.
func mergePreview(previews []promotionv1alpha1.StackPreview, pv promotionv1alpha1.StackPreview) []promotionv1alpha1.StackPreview {
	for i := range previews {
		if previews[i].Name == pv.Name {
			previews[i] = pv
			return previews
		}
	}
	return append(previews, pv)
}

// runPreview makes sure the preview of stack runs (stackrun.Preview), and
// records its outcome in pv once it has ended: the summary and changes of
// a success, or, as failure, why it failed. An interrupted or conflicting
// preview is started again, up to maxPreviewAttempts times. pv records
// the UIDs of what the preview made, which the choke point reads.
func (s *session) runPreview(ctx context.Context, stack *pulumiv1.Stack, pv *promotionv1alpha1.StackPreview) (failure string, err error) {
	// A preview makes objects whose UIDs only this reconcile's status
	// patch records; a copy older than the Promotion stored would make
	// them and then, stale, write nothing (finish), leaving them to be
	// deleted as nobody's. So the copy is checked once, before anything
	// is made.
	if current, err := s.isCurrent(ctx); err != nil {
		return "", sreconcile.NewGeneric("", err)
	} else if !current {
		s.stale = true
		return "", sreconcile.NewWaiting("", errors.New("the promotion read from the cache is older than the one stored: looking again"), cacheLag)
	}
	// Only this Stack's record is behind: the others' previews go on
	// (their records are written over the versions read). A name taken
	// by someone else's object (recordTaken) ends the promotion when
	// finish stores the records.
	if current, err := s.recordCurrent(ctx, stack.Name); err != nil {
		return "", err
	} else if !current {
		return "", sreconcile.NewWaiting("", errors.New("the record of Stack "+stack.Name+" read from the cache is older than the one stored: looking again"), cacheLag)
	}
	if pv.Update == "" {
		// A new round: what the Stack reads is recorded before its
		// Workspace is made from it, so that a change from here on is
		// seen (reconcileInputs).
		pv.Round = max(pv.Round, 1)
		if pv.Inputs, err = change.StackDigest(ctx, s.r.APIReader, stack); err != nil {
			return "", err
		}
		pv.Update, pv.Recorded = change.PreviewName(s.p.Name, stack.Name, pv.Round), nil
	}
	preview := &stackrun.Preview{
		Client: s.r.Client, APIReader: s.r.APIReader, Maker: s.p, Kind: "promotion", Record: s.recordOf(stack.Name),
		Stack: stack, Commit: s.release.Spec.Commit.SHA,
		Name: change.PreviewName(s.p.Name, stack.Name, pv.Round), Update: pv.Update,
		Labels:      map[string]string{PromotionLabel: s.p.Name, StackLabel: stack.Name},
		Trigger:     TriggerPromotion,
		Message:     fmt.Sprintf("preview of release %s (%s) for promotion %s", s.p.Spec.Release, change.ShortCommit(s.release.Spec.Commit.SHA), s.p.Name),
		MaxAttempts: maxPreviewAttempts,
	}
	if pv.Recorded != nil {
		preview.Recorded = *pv.Recorded
	}
	st, err := preview.Run(ctx)
	s.stale = s.stale || preview.MakerStale
	pv.Update, pv.Recorded = preview.Update, &st.Recorded
	switch {
	case err != nil:
		return "", err
	case st.Failure != "":
		if st.Detail != "" {
			pv.Message = st.Detail
		}
		return st.Failure, nil
	case !st.Succeeded():
		return "", nil
	}
	upd := st.Update
	src, patch := s.compareSource(ctx, stack)
	plan, digest, failure, err := s.copyPlan(ctx, upd, stack.Name, pv.Round, patch)
	if failure != "" || err != nil {
		return failure, err
	}
	pv.Plan, pv.PlanDigest, pv.Source = plan, digest, src
	pv.Summary, pv.Changes = change.Summarize(upd, maxPreviewChanges)
	pv.Message = change.DescribeSummary(pv.Summary)
	return "", nil
}

// createOwned creates obj, controlled by the promotion; one that exists
// already is what an earlier reconcile made.
func (s *session) createOwned(ctx context.Context, obj client.Object) error {
	if err := controllerutil.SetControllerReference(s.p, obj, s.r.Client.Scheme()); err != nil {
		return err
	}
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if err := s.r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsInvalid(err) {
			return sreconcile.NewStalling(ReasonPreviewFailed, fmt.Errorf("the preview's %s %s was rejected: %w", kind, obj.GetName(), err))
		}
		return sreconcile.NewGeneric(ReasonPreviewFailed, fmt.Errorf("creating the preview's %s %s: %w", kind, obj.GetName(), err))
	}
	return nil
}

// ReasonPreviewFailed is the reason of a failed attempt to start a preview,
// retried with backoff.
const ReasonPreviewFailed = "PreviewFailed"

// failPreview ends the promotion as Failed because the preview pv failed,
// before anything changed: the release failed in the stage.
func (s *session) failPreview(ctx context.Context, pv promotionv1alpha1.StackPreview, failure string) (sreconcile.Result, error) {
	s.recs.previews = mergePreview(s.recs.previews, pv)
	if err := s.deletePreviews(ctx, true); err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.p.Status.Commit = s.release.Spec.Commit.SHA
	s.outcome, s.message, s.releaseFailed = promotionv1alpha1.PromotionFailed, failure+"; nothing was changed", true
	return s.recordOutcome(ctx)
}

// finishPreviewOnly ends the promotion of a preview-only stage, whose
// previews all succeeded and, where the stage requires it, were approved
// (startPromotion calls it in place of pinning): the release is verified
// there, and no Stack was pinned.
func (s *session) finishPreviewOnly(ctx context.Context) (sreconcile.Result, error) {
	st := &s.p.Status
	st.Commit = s.release.Spec.Commit.SHA
	if st.StartTime == nil {
		now := metav1.NewTime(s.now)
		st.StartTime = &now
	}
	s.outcome = promotionv1alpha1.PromotionSucceeded
	s.message = fmt.Sprintf("previewed %s in preview stage %s, which changes nothing: %s", change.ShortCommit(st.Commit), s.stage.Name, DescribePreviews(s.recs.previews))
	return s.recordOutcome(ctx)
}

// deletePreviews deletes the promotion's preview Workspaces, and with
// updates also its preview Updates that have not completed (which cancels
// a preview still running). Completed Updates stay, owned by the
// promotion, as the record of what was previewed.
func (s *session) deletePreviews(ctx context.Context, updates bool) error {
	sel := client.MatchingLabels{PromotionLabel: s.p.Name}
	var wss autov1alpha1.WorkspaceList
	if err := s.r.Client.List(ctx, &wss, client.InNamespace(s.p.Namespace), sel); err != nil {
		return sreconcile.NewGeneric("", fmt.Errorf("listing the preview Workspaces: %w", err))
	}
	var objs []client.Object
	for i := range wss.Items {
		if metav1.IsControlledBy(&wss.Items[i], s.p) {
			objs = append(objs, &wss.Items[i])
		}
	}
	if updates {
		var upds autov1alpha1.UpdateList
		if err := s.r.Client.List(ctx, &upds, client.InNamespace(s.p.Namespace), sel); err != nil {
			return sreconcile.NewGeneric("", fmt.Errorf("listing the preview Updates: %w", err))
		}
		for i := range upds.Items {
			if metav1.IsControlledBy(&upds.Items[i], s.p) && !upds.Items[i].Status.IsComplete() {
				objs = append(objs, &upds.Items[i])
			}
		}
	}
	for _, obj := range objs {
		if !obj.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := s.r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return sreconcile.NewGeneric("", fmt.Errorf("deleting the preview's %s: %w", obj.GetName(), err))
		}
	}
	return nil
}

// fleetSummaryFrom is how many Stacks DescribePreviews still names one by
// one; more are summed up by what they change (change.DescribeFleet).
const fleetSummaryFrom = 4

// DescribePreviews renders the previews of a promotion, Stack by Stack
// ("web: 1 to update; db: no changes"), or, for more than
// fleetSummaryFrom Stacks, grouped by what they change ("12 Stacks: 11
// with 1 to update; 1 with no changes").
func DescribePreviews(previews []promotionv1alpha1.StackPreview) string {
	if len(previews) == 0 {
		return "no Stacks"
	}
	if len(previews) > fleetSummaryFrom {
		summaries := make([]*promotionv1alpha1.ChangeSummary, len(previews))
		for i := range previews {
			summaries[i] = previews[i].Summary
		}
		return change.DescribeFleet(summaries)
	}
	parts := make([]string, 0, len(previews))
	for _, pv := range previews {
		parts = append(parts, pv.Name+": "+change.DescribeSummary(pv.Summary))
	}
	return strings.Join(parts, "; ")
}
