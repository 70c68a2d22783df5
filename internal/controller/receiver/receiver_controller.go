package receiver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	"github.com/stackyard/stackyard/internal/receiver"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Reasons of a Receiver's conditions.
const (
	// ReasonSecretMissing: the Secret spec.secretRef names does not exist.
	ReasonSecretMissing = "SecretMissing"
	// ReasonNoToken: the Secret has no key "token".
	ReasonNoToken = "NoToken"
)

// readyMessage is the Ready message of a Receiver.
const readyMessage = "listening at status.webhookPath"

// resync is how often a Receiver is looked at again by itself, so that a
// token rotated in its Secret moves its path.
const resync = 5 * time.Minute

// Reconciler reconciles Receivers:
//
//	reconcileToken → reconcilePath
type Reconciler struct {
	// Client reads Receivers and patches their status.
	Client client.Client
	// Secrets reads the Receivers' Secrets.
	Secrets client.Reader
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile publishes one Receiver's path.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &notificationv1alpha1.Receiver{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := sreconcile.NewPatcher(r.Client, obj)
	var (
		res   sreconcile.Result
		err   error
		token string
	)
	defer func() { result, retErr = r.finish(ctx, obj, patcher, res, err) }()
	res, err = sreconcile.Steps{
		{Name: "reconcileToken", Run: func(ctx context.Context) (sreconcile.Result, error) {
			var terr error
			token, terr = r.reconcileToken(ctx, obj)
			return sreconcile.ResultEmpty, terr
		}},
		{Name: "reconcilePath", Run: func(context.Context) (sreconcile.Result, error) {
			obj.Status.WebhookPath = Path(token, obj.Name, obj.Namespace)
			return sreconcile.ResultSuccess, nil
		}},
	}.Run(ctx)
	return
}

// reconcileToken reads the token from the Secret spec.secretRef names. A
// Secret that does not exist yet is waited for; one without the key
// stalls. While there is no token, the Receiver has no path.
func (r *Reconciler) reconcileToken(ctx context.Context, obj *notificationv1alpha1.Receiver) (string, error) {
	var s corev1.Secret
	err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: obj.Spec.SecretRef.Name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		obj.Status.WebhookPath = ""
		return "", sreconcile.NewMissing(ReasonSecretMissing, fmt.Errorf("spec.secretRef: Secret %q not found", obj.Spec.SecretRef.Name))
	case err != nil:
		return "", sreconcile.NewGeneric(ReasonSecretMissing, fmt.Errorf("spec.secretRef: reading Secret %q: %w", obj.Spec.SecretRef.Name, err))
	}
	token := string(s.Data[notificationv1alpha1.ReceiverTokenKey])
	if token == "" {
		obj.Status.WebhookPath = ""
		return "", sreconcile.NewStalling(ReasonNoToken, fmt.Errorf("spec.secretRef: Secret %q has no key %q", s.Name, notificationv1alpha1.ReceiverTokenKey))
	}
	return token, nil
}

// Path is the webhook path of the Receiver name in namespace with token:
// receiver.PathPrefix and the hex sha256 of the three, which only who
// knows the token can tell apart from any other.
func Path(token, name, namespace string) string {
	sum := sha256.Sum256([]byte(token + "\x00" + name + "\x00" + namespace))
	return receiver.PathPrefix + hex.EncodeToString(sum[:])
}

// finish summarizes the outcome into the kstatus conditions, patches the
// status once and asks to be looked at again after resync.
func (r *Reconciler) finish(ctx context.Context, obj *notificationv1alpha1.Receiver, patcher *sreconcile.Patcher, res sreconcile.Result, err error) (ctrl.Result, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	err = sreconcile.Escalate(obj.Status.Conditions, obj.Generation, err, now, sreconcile.DefaultStallAfter)
	if sreconcile.Summarize(&obj.Status.Conditions, obj.Generation, res, err, sreconcile.WithReadyMessage(readyMessage)) {
		obj.Status.ObservedGeneration = obj.Generation
	}
	if perr := patcher.Patch(ctx, obj); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{Interval: resync})
}
