package stackrun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
)

// Preview runs a Stack's program at a commit, with the Stack's inputs, in
// a Workspace and an Update of its own, for a maker: a Promotion
// previewing a release, or a Pipeline previewing a pull request. Both are
// named in advance (Name, and Update for the attempt) and made by Run,
// controlled by the maker; the maker records the UIDs Run returns, and
// passes them back on its next Run. An object found under one of those
// names whose UID the maker has not recorded is not the preview's, whatever
// it claims: one that names the maker as its controller (made by a
// reconcile killed before its record, or by someone else) is deleted and
// made anew, and one that does not fails the preview.
type Preview struct {
	// Client reads (through the cache) and writes.
	Client client.Client
	// APIReader reads past the cache: an object the create finds
	// existing is checked as the API server holds it.
	APIReader client.Reader
	// Maker controls what the preview makes; Kind names it in messages
	// ("promotion", "Pipeline").
	Maker client.Object
	Kind  string
	// Record is the object whose copy in hand holds Recorded, when it is
	// not Maker (a promotion records each preview in a StackPromotion of
	// its own, which may not exist yet): Run reads it live, as it would
	// Maker, before it deletes an object it finds unrecorded.
	Record client.Object
	// Stack is previewed at Commit.
	Stack  *pulumiv1.Stack
	Commit string
	// Name is the Workspace's name, and the first attempt's Update's;
	// Update is the current attempt's (Name, or Name-N for attempt N).
	Name, Update string
	// Recorded are the UIDs the maker recorded of the Workspace and the
	// current attempt's Update (empty for none yet).
	Recorded promotionv1alpha1.PreviewRecord
	// Labels are put on the Workspace and the Update, with the Stack's
	// own but for StackNameLabel, which marks the Stack's own objects.
	Labels map[string]string
	// Trigger is the Update's TriggerAnnotation.
	Trigger string
	// Message is the Update's spec.message when the Stack's
	// updateTemplate sets none.
	Message string
	// MaxAttempts is how many times the preview runs when an attempt ends
	// Interrupted or UpdateConflict, which say nothing about what is
	// previewed.
	MaxAttempts int

	// MakerStale is set by Run when it found Maker (or Record) older than
	// the one the API server holds (makerStale). The caller must then write
	// nothing of the maker's status from this copy: a merge patch
	// replaces a list whole, so it would put back the older record and
	// throw away the newer one, whose preview the next reconcile would
	// then delete as nobody's and make again.
	MakerStale bool
}

// PreviewState is where a preview stands after Run.
type PreviewState struct {
	// Recorded are the UIDs of the Workspace and the Update, as the maker
	// must record them (what it passed, and what Run made).
	Recorded promotionv1alpha1.PreviewRecord
	// Update is the current attempt's Update; nil until it exists and
	// the cache holds it.
	Update *autov1alpha1.Update
	// next names the next attempt's Update when the current one ended
	// Interrupted or UpdateConflict and may run again.
	next string
	// Failure says why the preview failed or cannot run; "" otherwise.
	// Detail is the reason and message of the stalled Workspace or the
	// failed Update behind it, when there is one.
	Failure, Detail string
}

// Succeeded reports whether the current attempt's Update completed
// without failing.
func (st *PreviewState) Succeeded() bool {
	return st.Failure == "" && st.next == "" && st.Update != nil && st.Update.Status.IsComplete() &&
		!apimeta.IsStatusConditionTrue(st.Update.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
}

// Run makes sure the preview runs, and says where it stands. An attempt
// that ended Interrupted or UpdateConflict is followed at once by the
// next, up to MaxAttempts: p.Update then names it, for the maker to
// record. Once the Update has completed, its Workspace is not made again
// (the maker may delete it). An error is to be retried; a Stack whose spec
// makes no Workspace (a stall) is a Failure.
func (p *Preview) Run(ctx context.Context) (PreviewState, error) {
	for {
		st, err := p.attempt(ctx)
		if err != nil || st.next == "" {
			return st, err
		}
		p.Update, p.Recorded = st.next, promotionv1alpha1.PreviewRecord{Workspace: st.Recorded.Workspace}
	}
}

// attempt is Run for the current attempt.
func (p *Preview) attempt(ctx context.Context) (PreviewState, error) {
	st := PreviewState{Recorded: p.Recorded}
	upd, err := existing(ctx, p, p.Update, p.Recorded.Update, &autov1alpha1.Update{})
	if err != nil {
		return st, failure(&st, err)
	}
	if upd != nil && upd.Status.IsComplete() {
		st.Update = upd
		return p.judge(st, nil), nil
	}
	ws, err := existing(ctx, p, p.Name, p.Recorded.Workspace, &autov1alpha1.Workspace{})
	if err != nil {
		return st, failure(&st, err)
	}
	if ws == nil {
		if ws, err = p.makeWorkspace(ctx); err != nil {
			return st, failure(&st, err)
		}
		st.Recorded.Workspace = ws.UID
	}
	if upd == nil {
		if upd, err = p.makeUpdate(ctx, ws); err != nil {
			return st, failure(&st, err)
		}
		st.Recorded.Update = upd.UID
	}
	st.Update = upd
	return p.judge(st, ws), nil
}

// makeWorkspace makes the preview's Workspace: the Stack's, as the Stack
// controller builds it, at Commit, under Name.
func (p *Preview) makeWorkspace(ctx context.Context) (*autov1alpha1.Workspace, error) {
	src, err := SourceAt(ctx, p.Client, p.Stack, p.Commit)
	if err != nil {
		return nil, fmt.Errorf("Stack %s: %w", p.Stack.Name, err)
	}
	ws, err := BuildWorkspace(p.Stack, src)
	if err != nil {
		return nil, fmt.Errorf("Stack %s: %w", p.Stack.Name, err)
	}
	ws.Name, ws.Labels = p.Name, p.labels(ws.Labels)
	live := &autov1alpha1.Workspace{}
	if existed, err := p.create(ctx, ws, live, p.Recorded.Workspace); existed || err != nil {
		return live, err
	}
	return ws, nil
}

// makeUpdate makes the current attempt's Update in ws: a preview that
// saves its plan (and its value diff), built as the Stack controller
// builds the Stack's own (its refresh, targets and updateTemplate).
func (p *Preview) makeUpdate(ctx context.Context, ws *autov1alpha1.Workspace) (*autov1alpha1.Update, error) {
	upd := BuildUpdate(p.Stack, UpdateFor{Revision: p.Commit, Type: autov1alpha1.PreviewType, Trigger: p.Trigger})
	upd.GenerateName, upd.Name, upd.Spec.WorkspaceName, upd.Labels = "", p.Update, ws.Name, p.labels(upd.Labels)
	// An Update runs only in its Workspace's shard, which is the Stack's
	// as it was when the Workspace was made: a retry follows the Workspace.
	shard.Stamp(ws, upd)
	upd.Spec.SavePlan = ptr.To(true)
	if upd.Spec.Message == nil {
		upd.Spec.Message = ptr.To(p.Message)
	}
	live := &autov1alpha1.Update{}
	if existed, err := p.create(ctx, upd, live, p.Recorded.Update); existed || err != nil {
		return live, err
	}
	return upd, nil
}

// labels are labels without StackNameLabel, with the preview's.
func (p *Preview) labels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if k != StackNameLabel {
			out[k] = v
		}
	}
	for k, v := range p.Labels {
		out[k] = v
	}
	return out
}

// create creates obj, controlled by the maker; obj then holds the UID the
// API server gave it. One that exists already (the cache had not seen it)
// is read live into live (existed): it is the preview's only if its UID is
// recorded, the maker's record of it (notOurs otherwise).
func (p *Preview) create(ctx context.Context, obj, live client.Object, recorded types.UID) (existed bool, err error) {
	if err := controllerutil.SetControllerReference(p.Maker, obj, p.Client.Scheme()); err != nil {
		return false, err
	}
	obj.SetResourceVersion("")
	obj.SetManagedFields(nil)
	kind := kindOf(obj)
	err = p.Client.Create(ctx, obj)
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsInvalid(err):
		return false, sreconcile.NewStalling("", fmt.Errorf("the preview's %s %s was rejected: %w", kind, obj.GetName(), err))
	case !apierrors.IsAlreadyExists(err):
		return false, sreconcile.NewGeneric("", fmt.Errorf("creating the preview's %s %s: %w", kind, obj.GetName(), err))
	}
	if err := p.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return false, sreconcile.NewGeneric("", fmt.Errorf("reading the preview's %s %s: %w", kind, obj.GetName(), err))
	}
	if recorded != "" && live.GetUID() == recorded {
		return true, nil
	}
	return true, p.notOurs(ctx, live)
}

// kindOf is obj's kind, from its Go type.
func kindOf(obj client.Object) string {
	k := fmt.Sprintf("%T", obj)
	return k[strings.LastIndex(k, ".")+1:]
}

// previewRecheck is how soon a preview whose object was deleted, to be
// made anew, looks again.
const previewRecheck = 2 * time.Second

// judge fills in the outcome of the current attempt.
func (p *Preview) judge(st PreviewState, ws *autov1alpha1.Workspace) PreviewState {
	upd := st.Update
	if upd == nil || !upd.Status.IsComplete() {
		if c := ws.StalledNow(); c != nil {
			st.Detail = sreconcile.Truncate(c.Reason+": "+c.Message, sreconcile.MaxConditionMessage)
			st.Failure = fmt.Sprintf("the preview of Stack %s cannot run: its Workspace %s is stalled: %s", p.Stack.Name, ws.Name, c.Message)
		}
		return st
	}
	f := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
	if f == nil || f.Status != metav1.ConditionTrue {
		return st
	}
	if attempt := Attempt(p.Name, p.Update); (f.Reason == autov1alpha1.UpdateReasonInterrupted || f.Reason == autov1alpha1.UpdateReasonConflict) &&
		attempt < p.MaxAttempts {
		st.next = p.Name + "-" + strconv.Itoa(attempt+1)
		return st
	}
	st.Detail = sreconcile.Truncate(fmt.Sprintf("%s: %s", f.Reason, upd.Status.Message), sreconcile.MaxConditionMessage)
	st.Failure = fmt.Sprintf("the preview of Stack %s failed (Update %s): %s", p.Stack.Name, upd.Name, upd.Status.Message)
	return st
}

// Attempt is the attempt number of the preview Update update of the
// preview name: N for name-N, 1 for name itself.
func Attempt(name, update string) int {
	if n, err := strconv.Atoi(strings.TrimPrefix(update, name+"-")); err == nil && strings.HasPrefix(update, name+"-") {
		return n
	}
	return 1
}

// failure turns a Stalling error (the Stack's spec cannot make a
// Workspace, the API server refuses what it makes) into the preview's
// Failure, and returns any other error for a retry.
func failure(st *PreviewState, err error) error {
	var stalling *sreconcile.Stalling
	if errors.As(err, &stalling) {
		st.Failure = err.Error()
		return nil
	}
	return err
}

// existing returns the object called name that the preview made (the
// cache's copy), nil when there is none yet. uid is the maker's record of
// it. One whose UID is not the record is deleted if it names the maker as
// its controller (an error then asks to look again once it is gone), and
// is a Stalling error naming it otherwise.
func existing[T client.Object](ctx context.Context, p *Preview, name string, uid types.UID, obj T) (T, error) {
	var none T
	err := p.Client.Get(ctx, client.ObjectKey{Namespace: p.Stack.Namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return none, nil
	case err != nil:
		return none, sreconcile.NewGeneric("", fmt.Errorf("reading %s %s: %w", kindOf(obj), name, err))
	case uid != "" && obj.GetUID() == uid:
		return obj, nil
	}
	return none, p.notOurs(ctx, obj)
}

// notOurs handles obj, found under one of the preview's names, whose UID
// the maker has not recorded.
func (p *Preview) notOurs(ctx context.Context, obj client.Object) error {
	kind := kindOf(obj)
	if !metav1.IsControlledBy(obj, p.Maker) {
		return sreconcile.NewStalling("", fmt.Errorf("%s %s, where the preview of Stack %s runs, exists and does not belong to the %s",
			kind, obj.GetName(), p.Stack.Name, p.Kind))
	}
	// The maker's record may be newer than the copy in hand: the cache
	// can still hold the maker as it was before the status that recorded
	// obj was written (a reconcile woken by obj's own creation). Deleting
	// then would throw away the preview just made, and make it again, in
	// a loop. So obj is deleted only when the maker read live is the
	// maker in hand; otherwise the reconcile looks again with the record.
	if stale, err := p.makerStale(ctx); err != nil || stale {
		p.MakerStale = stale
		if err == nil {
			err = sreconcile.NewWaiting("", fmt.Errorf("%s %s is not in the %s's record as read from the cache, which is older than the %s: looking again",
				kind, obj.GetName(), p.Kind, p.Kind), previewRecheck)
		}
		return err
	}
	uid := obj.GetUID()
	if err := p.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return sreconcile.NewGeneric("", fmt.Errorf("deleting %s %s, which the %s has no record of making: %w", kind, obj.GetName(), p.Kind, err))
	}
	return sreconcile.NewWaiting("", fmt.Errorf("%s %s names the %s as its controller, but the %s has no record of it: deleted, to be made anew",
		kind, obj.GetName(), p.Kind, p.Kind), previewRecheck)
}

// makerStale reports whether the maker read live from the API server has
// changed since the copy in hand was read: then its record of what the
// preview made may be newer than the one in hand.
func (p *Preview) makerStale(ctx context.Context) (bool, error) {
	holder := p.Maker
	if p.Record != nil {
		holder = p.Record
	}
	stale, err := Stale(ctx, p.APIReader, holder)
	if err != nil {
		return false, sreconcile.NewGeneric("", fmt.Errorf("reading the record of the %s %s: %w", p.Kind, p.Maker.GetName(), err))
	}
	return stale, nil
}

// Stale reports whether obj, as the caller holds it (from the cache), is
// older than the object the API server holds now (or, for an object not
// created yet, without a resourceVersion, whether one exists), read through reader
// (which must not be the cache): then what obj's status records may have
// been written over since, and a patch of its status from obj would put
// older records back.
func Stale(ctx context.Context, reader client.Reader, obj client.Object) (bool, error) {
	live, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not an API object", obj)
	}
	switch err := reader.Get(ctx, client.ObjectKeyFromObject(obj), live); {
	case apierrors.IsNotFound(err):
		// Gone, or, for an object the caller has not created yet (no
		// resourceVersion), as the caller holds it.
		return obj.GetResourceVersion() != "", nil
	case err != nil:
		return false, err
	}
	return live.GetResourceVersion() != obj.GetResourceVersion(), nil
}
