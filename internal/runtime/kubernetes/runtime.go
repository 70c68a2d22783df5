package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
)

// Name is the runtime's name in logs, events and metrics.
const Name = "kubernetes"

// DefaultFieldOwner is the server-side apply field manager of the objects
// the runtime writes.
const DefaultFieldOwner = "stackyard-workspace"

// The RBAC the runtime needs, for the operator's ClusterRole.
//
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;create;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// Options configure a Runtime.
type Options struct {
	// Client writes the StatefulSets and Services and mints tokens.
	// Required.
	Client client.Client
	// Reader reads the workspace pods; give it the manager's API reader so
	// the operator does not cache every pod of the cluster. Nil means
	// Client.
	Reader client.Reader
	// Scheme knows the Workspace type, for owner references. Required.
	Scheme *k8sruntime.Scheme
	// Build are the operator-wide settings of the pods.
	Build BuildOptions
	// ServiceAccount is the operator's own service account, for which Dial
	// requests tokens. Required for Dial.
	ServiceAccount types.NamespacedName
	// TokenTTL is the lifetime asked for the tokens; zero means
	// DefaultTokenTTL. The API server raises anything under ten minutes.
	TokenTTL time.Duration
	// FieldOwner is the server-side apply field manager; empty means
	// DefaultFieldOwner.
	FieldOwner string
}

// Runtime runs Workspace agents in pods. It implements runtime.Runtime and
// is safe for concurrent use.
type Runtime struct {
	opts   Options
	tokens *tokenSource
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a Runtime.
func New(opts Options) (*Runtime, error) {
	if opts.Client == nil || opts.Scheme == nil || opts.Build.InitImage == "" {
		return nil, errors.New("kubernetes runtime: Client, Scheme and Build.InitImage are required")
	}
	if opts.Reader == nil {
		opts.Reader = opts.Client
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.FieldOwner == "" {
		opts.FieldOwner = DefaultFieldOwner
	}
	return &Runtime{opts: opts, tokens: &tokenSource{
		c: opts.Client, sa: opts.ServiceAccount, ttl: opts.TokenTTL, now: time.Now, tokens: map[string]cachedToken{},
	}}, nil
}

// Name returns "kubernetes".
func (r *Runtime) Name() string { return Name }

// Ensure applies ws's Service and StatefulSet at one replica and reports
// whether its pod serves; see the package doc.
func (r *Runtime) Ensure(ctx context.Context, ws *autov1alpha1.Workspace) (runtime.Status, error) {
	built, err := BuildStatefulSet(ws, r.opts.Build, 1)
	if err != nil {
		return runtime.Status{}, err
	}
	if err := r.stampReads(ctx, ws, built); err != nil {
		return runtime.Status{}, err
	}
	claim, err := r.bindCacheClaim(ctx, ws, built)
	if err != nil {
		return runtime.Status{}, err
	}
	sts, err := r.apply(ctx, ws, built)
	if err != nil {
		return runtime.Status{}, err
	}
	if claim != "" {
		if err := r.dropUnrecordedClaims(ctx, ws, claim); err != nil {
			return runtime.Status{}, err
		}
	}
	pod, err := r.pod(ctx, ws)
	if err != nil {
		return runtime.Status{}, err
	}
	if stale(sts, pod) && !podReady(pod) {
		// A StatefulSet does not replace a pod that never became ready
		// (its rolling update waits for it forever), so a spec that fixes
		// what broke the old pod would never take effect: replace it here.
		if err := r.opts.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
			return runtime.Status{}, reconcile.NewGeneric("", fmt.Errorf("replacing the stale workspace pod: %w", err))
		}
		return runtime.Status{Message: fmt.Sprintf("replacing pod %s, which runs an old revision and is not ready", pod.Name)}, nil
	}
	if err := fetchFailure(ws, pod); err != nil {
		return runtime.Status{}, err
	}
	if !rolledOut(sts) || pod == nil || !podReady(pod) || pod.Labels[appsv1.ControllerRevisionHashLabelKey] != sts.Status.UpdateRevision {
		return runtime.Status{Message: waitingMessage(sts, pod)}, nil
	}
	return runtime.Status{
		Ready:    true,
		Address:  Address(ws),
		Revision: initReport(pod).Revision,
		Instance: string(pod.UID),
	}, nil
}

// Idle scales ws's StatefulSet to zero, if there is one; the Service
// stays. Only spec.replicas is written, so a Workspace whose spec cannot be
// built (a stalled one) can still be idled.
func (r *Runtime) Idle(ctx context.Context, ws *autov1alpha1.Workspace) error {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Namespace, Name: ObjectName(ws)}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
	err := r.opts.Client.Patch(ctx, sts, patch, client.FieldOwner(r.opts.FieldOwner))
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.NewGeneric("", fmt.Errorf("scaling StatefulSet %s to zero: %w", sts.Name, err))
	}
	return nil
}

// Delete forgets ws's cached token; its StatefulSet and Service are owned
// by ws and go with it.
func (r *Runtime) Delete(_ context.Context, ws *autov1alpha1.Workspace) error {
	r.tokens.forget(auth.WorkspaceAudience(ws.Namespace, ws.Name))
	return nil
}

// Dial connects to ws's agent through its Service, presenting a token of
// the operator's service account bound to ws's audience on every call.
func (r *Runtime) Dial(ctx context.Context, ws *autov1alpha1.Workspace) (*grpc.ClientConn, error) {
	if r.opts.ServiceAccount.Name == "" {
		return nil, errors.New("kubernetes runtime: no ServiceAccount configured to request tokens for")
	}
	audience := auth.WorkspaceAudience(ws.Namespace, ws.Name)
	// Mint now, so that a refused TokenRequest fails Dial rather than the
	// first call.
	if _, err := r.tokens.token(ctx, audience); err != nil {
		return nil, err
	}
	return grpc.NewClient("dns:///"+Address(ws),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(r.tokens.perRPC(audience)))
}

// apply writes ws's Service and its StatefulSet sts (BuildStatefulSet's)
// by server-side apply and returns the StatefulSet as the API server
// stored it.
func (r *Runtime) apply(ctx context.Context, ws *autov1alpha1.Workspace, sts *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	svc := BuildService(ws)
	for _, obj := range []client.Object{svc, sts} {
		if err := controllerutil.SetControllerReference(ws, obj, r.opts.Scheme); err != nil {
			return nil, err
		}
	}
	if _, err := r.applyObject(ctx, svc); err != nil {
		return nil, reconcile.NewGeneric("", fmt.Errorf("applying Service %s: %w", svc.Name, err))
	}
	u, err := r.applyObject(ctx, sts)
	if immutable(err) {
		// The claim templates changed (the cache turned on, off or to
		// another size): a StatefulSet cannot take that, so it is made
		// anew. Its claims go with it; its pod goes too, and an
		// operation it ran fails as one whose agent was lost.
		old := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: sts.Name}}
		if err := r.opts.Client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return nil, reconcile.NewGeneric("", fmt.Errorf("replacing StatefulSet %s, whose volume claim templates changed: %w", sts.Name, err))
		}
		return nil, reconcile.NewWaiting("", fmt.Errorf("replacing StatefulSet %s, whose volume claim templates changed", sts.Name), time.Second)
	}
	if err != nil {
		return nil, reconcile.NewGeneric("", fmt.Errorf("applying StatefulSet %s: %w", sts.Name, err))
	}
	var live appsv1.StatefulSet
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &live); err != nil {
		return nil, err
	}
	return &live, nil
}

// applyObject server-side applies obj with only the fields it sets (no
// status, no nulls) and returns the stored object.
func (r *Runtime) applyObject(ctx context.Context, obj client.Object) (*unstructured.Unstructured, error) {
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	u := &unstructured.Unstructured{Object: prune(m).(map[string]any)}
	err = r.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(r.opts.FieldOwner), client.ForceOwnership)
	return u, err
}

// pod returns ws's pod, or nil when there is none.
func (r *Runtime) pod(ctx context.Context, ws *autov1alpha1.Workspace) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := r.opts.Reader.Get(ctx, types.NamespacedName{Namespace: ws.Namespace, Name: ObjectName(ws) + "-0"}, &pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, reconcile.NewGeneric("", fmt.Errorf("reading the workspace pod: %w", err))
	}
	return &pod, nil
}

// immutable reports whether err is the API server refusing a change to
// a StatefulSet's fields that cannot change after creation.
func immutable(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "updates to statefulset spec for fields other than")
}

// bindCacheClaim gives the cache volume of sts, when the runtime makes its
// claim (ownCacheVolume), the claim the live StatefulSet records, or a new
// one, and records it on sts. It returns the claim's name, "" when the
// Workspace has no such volume.
//
// The record (CacheClaimAnnotation, on a StatefulSet only the operator may
// write) is the claim's name and UID, from the create's answer. A recorded
// claim is used only while it exists with that UID, controlled by ws, and
// is not being deleted. Otherwise (it was deleted, or someone made another
// under its name, which the API server generated and anyone may now know)
// a new one is made, under a name nobody can know before it exists: no
// claim made first, with content of someone's choosing, reaches the agent.
func (r *Runtime) bindCacheClaim(ctx context.Context, ws *autov1alpha1.Workspace, sts *appsv1.StatefulSet) (string, error) {
	vol := ownCacheVolume(sts)
	if vol == nil {
		return "", nil
	}
	var live appsv1.StatefulSet
	err := r.opts.Reader.Get(ctx, types.NamespacedName{Namespace: ws.Namespace, Name: ObjectName(ws)}, &live)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", reconcile.NewGeneric("", fmt.Errorf("reading StatefulSet %s: %w", ObjectName(ws), err))
	}
	name, uid, recorded := parseClaimRecord(live.Annotations[CacheClaimAnnotation])
	if recorded {
		var claim corev1.PersistentVolumeClaim
		err := r.opts.Reader.Get(ctx, types.NamespacedName{Namespace: ws.Namespace, Name: name}, &claim)
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return "", reconcile.NewGeneric("", fmt.Errorf("reading the cache claim %s: %w", name, err))
		case err != nil, claim.UID != uid, !claim.DeletionTimestamp.IsZero(), !metav1.IsControlledBy(&claim, ws):
			recorded = false
		}
	}
	if !recorded {
		claim := cacheClaim(ws, r.opts.Build.Cache)
		if err := controllerutil.SetControllerReference(ws, claim, r.opts.Scheme); err != nil {
			return "", err
		}
		if err := r.opts.Client.Create(ctx, claim); err != nil {
			return "", reconcile.NewGeneric("", fmt.Errorf("making the cache claim: %w", err))
		}
		name, uid = claim.Name, claim.UID
	}
	vol.ClaimName = name
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[CacheClaimAnnotation] = claimRecord(name, uid)
	return name, nil
}

// dropUnrecordedClaims deletes the cache claims controlled by ws other than
// the one its StatefulSet now records: made by an Ensure that did not get
// to record them (the operator stopped between the create and the apply),
// or replaced. It runs once the StatefulSet holding the record is applied.
func (r *Runtime) dropUnrecordedClaims(ctx context.Context, ws *autov1alpha1.Workspace, recorded string) error {
	var list corev1.PersistentVolumeClaimList
	if err := r.opts.Reader.List(ctx, &list, client.InNamespace(ws.Namespace), client.MatchingLabels(Labels(ws))); err != nil {
		return reconcile.NewGeneric("", fmt.Errorf("listing the Workspace's cache claims: %w", err))
	}
	for i := range list.Items {
		claim := &list.Items[i]
		if claim.Name == recorded || !metav1.IsControlledBy(claim, ws) || !claim.DeletionTimestamp.IsZero() {
			continue
		}
		uid := claim.UID
		if err := r.opts.Client.Delete(ctx, claim, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return reconcile.NewGeneric("", fmt.Errorf("deleting cache claim %s, which the Workspace does not record: %w", claim.Name, err))
		}
	}
	return nil
}
