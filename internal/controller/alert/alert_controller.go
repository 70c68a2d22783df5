package alert

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/metrics"
	"github.com/stackyard/stackyard/internal/notify"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Reasons of an Alert's conditions.
const (
	// ReasonProviderMissing: the Provider spec.providerRef names does not
	// exist.
	ReasonProviderMissing = "ProviderMissing"
	// ReasonSecretMissing: the Secret the Provider names does not exist.
	ReasonSecretMissing = "SecretMissing"
	// ReasonProviderInvalid: the Provider or its Secret cannot be used as
	// it is (no address, an address that is not http(s), no token).
	ReasonProviderInvalid = "ProviderInvalid"
	// ReasonDeliveryFailed: the Provider refused an event or could not be
	// reached; it is retried with backoff.
	ReasonDeliveryFailed = "DeliveryFailed"
)

// maxBatch is how many events one reconcile sends at most; more are sent
// by the next, at once.
const maxBatch = 20

// maxFailure is the length status.lastFailure is cut to.
const maxFailure = 1024

// Reconciler reconciles Alerts:
//
//	reconcileProvider → collectEvents → deliverEvents
//
// It is the only place notifications are sent from, so a slow Provider
// delays its Alerts and nothing else.
type Reconciler struct {
	// Client reads Alerts, Providers and the namespace's objects, and
	// patches the Alerts' status.
	Client client.Client
	// Secrets reads the Providers' Secrets.
	Secrets client.Reader
	// APIReader reads the Alert itself, uncached: the keys it delivered
	// are in its status, and a cache one patch behind would send them
	// again. Client when nil.
	APIReader client.Reader
	// Sender sends the events.
	Sender *notify.Sender
	// DashboardURL is the dashboard's external address, linked from the
	// events; empty for none.
	DashboardURL string
	// Metrics counts the deliveries; nil records nothing.
	Metrics *metrics.Notifications
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile sends one Alert's events that hold and were not sent yet.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &notificationv1alpha1.Alert{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := sreconcile.NewPatcher(r.Client, obj)
	var (
		res    sreconcile.Result
		err    error
		target notify.Target
		todo   []fact
	)
	defer func() { result, retErr = r.finish(ctx, obj, patcher, res, err) }()
	res, err = sreconcile.Steps{
		{Name: "reconcileProvider", Run: func(ctx context.Context) (sreconcile.Result, error) {
			var perr error
			target, perr = r.reconcileProvider(ctx, obj)
			return sreconcile.ResultEmpty, perr
		}},
		{Name: "collectEvents", Run: func(ctx context.Context) (sreconcile.Result, error) {
			var cerr error
			todo, cerr = r.collectEvents(ctx, obj, target.Type)
			return sreconcile.ResultEmpty, cerr
		}},
		{Name: "deliverEvents", Run: func(ctx context.Context) (sreconcile.Result, error) {
			return r.deliverEvents(ctx, obj, target, todo)
		}},
	}.Run(ctx)
	return
}

// reconcileProvider reads the Provider and its Secret into a Target. A
// Provider or Secret that does not exist yet is waited for; one that
// cannot be used stalls, naming the field.
func (r *Reconciler) reconcileProvider(ctx context.Context, obj *notificationv1alpha1.Alert) (notify.Target, error) {
	var p notificationv1alpha1.Provider
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: obj.Spec.ProviderRef.Name}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return notify.Target{}, sreconcile.NewMissing(ReasonProviderMissing, fmt.Errorf("spec.providerRef: Provider %q not found", obj.Spec.ProviderRef.Name))
	case err != nil:
		return notify.Target{}, sreconcile.NewGeneric(ReasonProviderMissing, fmt.Errorf("spec.providerRef: reading Provider %q: %w", obj.Spec.ProviderRef.Name, err))
	}
	t := notify.Target{Type: p.Spec.Type, Address: p.Spec.Address}
	where := fmt.Sprintf("Provider %q: spec.address", p.Name)
	if ref := p.Spec.SecretRef; ref != nil {
		var s corev1.Secret
		err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: ref.Name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			return t, sreconcile.NewMissing(ReasonSecretMissing, fmt.Errorf("Provider %q: spec.secretRef: Secret %q not found", p.Name, ref.Name))
		case err != nil:
			return t, sreconcile.NewGeneric(ReasonSecretMissing, fmt.Errorf("Provider %q: spec.secretRef: reading Secret %q: %w", p.Name, ref.Name, err))
		}
		t.Token = string(s.Data[notificationv1alpha1.ProviderTokenKey])
		if a := string(s.Data[notificationv1alpha1.ProviderAddressKey]); a != "" {
			t.Address, t.AddressFromSecret = a, true
			where = fmt.Sprintf("Provider %q: key %q of Secret %q", p.Name, notificationv1alpha1.ProviderAddressKey, ref.Name)
		}
	}
	switch p.Spec.Type {
	case notificationv1alpha1.ProviderGitHub:
		if t.Address == "" {
			t.Address = notify.GitHubAPI
		}
	case notificationv1alpha1.ProviderGitLab:
		if t.Address == "" {
			t.Address = notify.GitLabAPI
		}
	}
	if err := notify.Validate(t.Address, where); err != nil {
		return t, sreconcile.NewStalling(ReasonProviderInvalid, err)
	}
	switch p.Spec.Type {
	case notificationv1alpha1.ProviderGitea, notificationv1alpha1.ProviderGitHub, notificationv1alpha1.ProviderGitLab:
		if t.Token == "" {
			return t, sreconcile.NewStalling(ReasonProviderInvalid, fmt.Errorf("Provider %q: spec.secretRef: a %s provider needs the key %q (its API token)",
				p.Name, p.Spec.Type, notificationv1alpha1.ProviderTokenKey))
		}
	}
	return t, nil
}

// collectEvents lists the namespace's objects from the cache and returns
// the events that hold and are still to be sent, oldest first.
func (r *Reconciler) collectEvents(ctx context.Context, obj *notificationv1alpha1.Alert, pt notificationv1alpha1.ProviderType) ([]fact, error) {
	var (
		objs       namespaceObjects
		promotions promotionv1alpha1.PromotionList
		releases   promotionv1alpha1.ReleaseList
		stacks     pulumiv1.StackList
		stages     promotionv1alpha1.StageList
		pipelines  promotionv1alpha1.PipelineList
	)
	in := client.InNamespace(obj.Namespace)
	for _, l := range []client.ObjectList{&promotions, &releases, &stacks, &stages, &pipelines} {
		if err := r.Client.List(ctx, l, in); err != nil {
			return nil, sreconcile.NewGeneric("", fmt.Errorf("listing the namespace's objects: %w", err))
		}
	}
	objs.Promotions, objs.Releases, objs.Stacks, objs.Stages, objs.pipelines = promotions.Items, releases.Items, stacks.Items, stages.Items, pipelines.Items
	return pending(obj, pt, facts(&objs, r.DashboardURL)), nil
}

// deliverEvents sends the events in order, remembering each one sent, and
// stops at the first failure, which is retried with backoff. A suspended
// Alert sends nothing.
func (r *Reconciler) deliverEvents(ctx context.Context, obj *notificationv1alpha1.Alert, t notify.Target, todo []fact) (sreconcile.Result, error) {
	if obj.Spec.Suspend {
		return sreconcile.ResultSuccess, nil
	}
	more := len(todo) > maxBatch
	if more {
		todo = todo[:maxBatch]
	}
	for i := range todo {
		e := &todo[i].event
		if err := r.Sender.Send(ctx, t, e); err != nil {
			r.Metrics.ObserveDelivery(obj.Namespace, obj.Name, metrics.NotificationFailed)
			obj.Status.FailedCount++
			msg := fmt.Sprintf("delivering %s (%s): %v", e.Type, e.Key, err)
			obj.Status.LastFailure = sreconcile.Truncate(msg, maxFailure)
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReasonDeliveryFailed, errors.New(msg))
		}
		r.Metrics.ObserveDelivery(obj.Namespace, obj.Name, metrics.NotificationDelivered)
		remember(&obj.Status, e, r.now())
		obj.Status.LastFailure = ""
	}
	if more {
		return sreconcile.ResultRequeue, nil
	}
	return sreconcile.ResultSuccess, nil
}

// now is the reconciler's clock.
func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// finish summarizes the outcome into the kstatus conditions and patches
// the status once: the events delivered are recorded even when a later one
// failed.
func (r *Reconciler) finish(ctx context.Context, obj *notificationv1alpha1.Alert, patcher *sreconcile.Patcher, res sreconcile.Result, err error) (ctrl.Result, error) {
	msg := fmt.Sprintf("sending to Provider %q", obj.Spec.ProviderRef.Name)
	if obj.Spec.Suspend {
		msg = "suspended"
	}
	if sreconcile.Summarize(&obj.Status.Conditions, obj.Generation, res, err, sreconcile.WithReadyMessage(msg)) {
		obj.Status.ObservedGeneration = obj.Generation
	}
	if perr := patcher.Patch(ctx, obj); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{})
}
