package program

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/artifact"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Finalizer holds a Program until its artifacts are removed from the store.
const Finalizer = "pulumi.com/finalizer"

// ArtifactKind is the kind segment of a Program's artifact path and URL.
const ArtifactKind = "program"

// readyMessage is the Ready message of a packaged Program.
const readyMessage = "the program has been packaged"

// Event reasons.
const (
	// EventArtifactUpdated: a new artifact was published.
	EventArtifactUpdated = "ArtifactUpdated"
)

// Reconciler reconciles Programs: Program → Pulumi.yaml → artifact →
// status.artifact. Each step is level-triggered and idempotent, so a
// reconcile stopped at any point is completed by the next one.
//
// The chain, for a Program that is not being deleted:
//
//	reconcileFinalizer → reconcileArtifact → garbageCollect
//
// and reconcileDelete for one that is.
type Reconciler struct {
	// Client reads Programs from the cache and writes them.
	Client client.Client
	// Scheme knows api/pulumi/v1.
	Scheme *runtime.Scheme
	// Store keeps the Programs' artifacts.
	Store *artifact.Store
	// Recorder emits events (mgr.GetEventRecorder("program-controller")).
	Recorder events.EventRecorder
}

// now is the time the reconcile works with.
func (r *Reconciler) now() time.Time { return time.Now() }

// Reconcile brings one Program's artifact in line with its generation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &pulumiv1.Program{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := sreconcile.NewPatcher(r.Client, obj)
	var (
		res sreconcile.Result
		err error
	)
	defer func() {
		result, retErr = r.finish(ctx, obj, patcher, res, err)
	}()

	if !obj.DeletionTimestamp.IsZero() {
		res, err = r.reconcileDelete(ctx, obj)
		return
	}
	previous := ""
	if obj.Status.Artifact != nil {
		previous = obj.Status.Artifact.Revision
	}
	res, err = sreconcile.Steps{
		{Name: "reconcileFinalizer", Run: func(context.Context) (sreconcile.Result, error) { return r.reconcileFinalizer(obj) }},
		{Name: "reconcileArtifact", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileArtifact(ctx, obj) }},
		{Name: "garbageCollect", Run: func(ctx context.Context) (sreconcile.Result, error) {
			return r.garbageCollect(ctx, obj, previous)
		}},
	}.Run(ctx)
	return
}

// finish summarizes the outcome (a failure lasting longer than
// sreconcile.DefaultStallAfter as a stall), patches the Program once and maps the
// outcome to controller-runtime's result.
//
// The kstatus conditions (a stackyard extension of the Program status)
// decide whether this generation was handled (observedGeneration); a stall
// is also announced as a Warning event naming the bad field.
func (r *Reconciler) finish(ctx context.Context, obj *pulumiv1.Program, patcher *sreconcile.Patcher, res sreconcile.Result, err error) (ctrl.Result, error) {
	if obj.DeletionTimestamp.IsZero() {
		err = sreconcile.Escalate(obj.Status.Conditions, obj.Generation, err, r.now(), sreconcile.DefaultStallAfter)
		if sreconcile.Summarize(&obj.Status.Conditions, obj.Generation, res, err, sreconcile.WithReadyMessage(readyMessage)) {
			obj.Status.ObservedGeneration = obj.Generation
		}
		if sreconcile.IsStalled(obj.Status.Conditions) {
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, sreconcile.Reason(err), "Reconcile", "%s", err.Error())
		}
	}
	if perr := patcher.Patch(ctx, obj); perr != nil {
		if err == nil || errors.As(err, new(*sreconcile.Stalling)) {
			return ctrl.Result{}, perr
		}
		err = errors.Join(err, perr)
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{})
}

// reconcileFinalizer adds the finalizer and asks for a requeue, so the
// Patcher records it before any artifact exists to be leaked.
func (r *Reconciler) reconcileFinalizer(obj *pulumiv1.Program) (sreconcile.Result, error) {
	if sreconcile.AddFinalizer(obj, Finalizer) {
		return sreconcile.ResultRequeue, nil
	}
	return sreconcile.ResultEmpty, nil
}

// key is where obj's artifacts live in the store.
func key(obj *pulumiv1.Program) artifact.Key {
	return artifact.Key{Kind: ArtifactKind, Namespace: obj.Namespace, Name: obj.Name}
}

// Revision is the artifact revision of a Program generation: the
// generation in decimal, e.g. "3".
func Revision(generation int64) string { return strconv.FormatInt(generation, 10) }

// reconcileArtifact renders the current generation, stores its artifact
// unless the store already holds the same bytes for it, and points
// status.artifact at it. A program Pulumi would refuse stalls with the
// field named; the previous artifact stays published.
func (r *Reconciler) reconcileArtifact(ctx context.Context, obj *pulumiv1.Program) (sreconcile.Result, error) {
	files, err := Render(obj.Name, &obj.Program)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, err)
	}
	data, err := artifact.Pack(files)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("packing the program: %w", err))
	}
	digest, _, _ := artifact.Digest(bytes.NewReader(data))
	rev := Revision(obj.Generation)

	stored, err := r.Store.Get(key(obj), rev)
	if err != nil || stored.Digest != digest {
		if stored, err = r.Store.Put(key(obj), rev, bytes.NewReader(data)); err != nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
		}
	}
	if cur := obj.Status.Artifact; cur != nil && cur.Revision == stored.Revision && cur.Digest == stored.Digest &&
		cur.URL == stored.URL && cur.Path == stored.Path {
		return sreconcile.ResultSuccess, nil
	}
	stored.LastUpdateTime = metav1.NewTime(r.now().UTC().Truncate(time.Second))
	obj.Status.Artifact = stored
	r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventArtifactUpdated, "Package",
		"stored artifact for revision %s with digest %s", rev, digest)
	log.FromContext(ctx).V(1).Info("stored artifact", "revision", rev, "digest", digest, "url", stored.URL)
	return sreconcile.ResultSuccess, nil
}

// garbageCollect removes the Program's artifacts other than the current
// revision and the one status pointed to before this reconcile, which
// workspaces may still be downloading. A failure is only logged: stale
// files cost disk, not correctness, and the next reconcile tries again.
func (r *Reconciler) garbageCollect(ctx context.Context, obj *pulumiv1.Program, previous string) (sreconcile.Result, error) {
	keep := []string{Revision(obj.Generation)}
	if previous != "" {
		keep = append(keep, previous)
	}
	removed, err := r.Store.GarbageCollect(key(obj), keep...)
	if err != nil {
		log.FromContext(ctx).Error(err, "removing old artifacts")
	} else if len(removed) > 0 {
		log.FromContext(ctx).V(1).Info("removed old artifacts", "revisions", removed)
	}
	return sreconcile.ResultEmpty, nil
}

// reconcileDelete removes every artifact of the Program, then releases it.
func (r *Reconciler) reconcileDelete(_ context.Context, obj *pulumiv1.Program) (sreconcile.Result, error) {
	if !sreconcile.HasFinalizer(obj, Finalizer) {
		return sreconcile.ResultEmpty, nil
	}
	if err := r.Store.Remove(key(obj)); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
	}
	sreconcile.RemoveFinalizer(obj, Finalizer)
	return sreconcile.ResultSuccess, nil
}
