// Package leader marks which replica of the operator leads, on the
// replicas' own Pods, so that a Service can send traffic to the leader
// alone.
//
// The artifact server runs on every replica, but only the leader builds
// Program artifacts, into its own state directory: a download that reached
// a standby would find nothing. The artifacts Service therefore selects the
// label Label as well as the operator's pods, and a Labeler on every replica
// keeps exactly the leader's Pod labelled:
//
//   - when the replica starts, it removes the label from its own Pod, which
//     may carry it from an earlier life as leader (a container restarted
//     in the same Pod);
//   - when it becomes the leader, it labels its own Pod first, so that the
//     Service is never left without an endpoint by this step, and then
//     removes the label from every other Pod of the same installation;
//   - when it stops, it removes the label from its own Pod, so a stopping
//     leader receives no more downloads.
//
// A leader that dies without stopping keeps its label until the next
// leader removes it, which that leader does as soon as it is elected. Only
// the leader ever adds the label, so two labelled Pods are seen only in
// that moment, and both then serve artifacts they have built.
package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/internal/shard"
)

// The Labeler reads and patches Pods in the operator's own namespace only,
// which a ClusterRole cannot express: the rule is in
// config/rbac/leader_election_role.yaml (get, list and patch on pods),
// beside the leader election Lease's.

// Label is the label the leader's Pod carries, with the value "true". The
// artifacts Service of the chart and of config/manager selects it.
const Label = "stackyard.dev/leader"

// installationLabels are the labels whose values, copied from the
// replica's own Pod, pick the other Pods of the same installation: the
// chart's Deployment selects its pods by the first two, config/manager's by
// the first. The third keeps a sharded installation's leaders
// (internal/shard), one per shard, from unlabelling each other.
var installationLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", shard.PodLabel}

// stopTimeout bounds the removal of the label when the replica stops.
const stopTimeout = 5 * time.Second

// Labeler keeps Label on the leader's Pod and on no other Pod of the
// installation. It is a manager runnable that runs on every replica,
// leader or not (NeedLeaderElection is false), and waits for Elected.
type Labeler struct {
	// Client reads and patches Pods. It must not read through the
	// manager's cache: the operator's namespace need not be one it
	// watches.
	Client client.Client
	// Pod is this replica's own Pod.
	Pod types.NamespacedName
	// Elected is closed when this replica becomes the leader (the
	// manager's Elected, which is closed at once without leader election).
	Elected <-chan struct{}
	// Log receives what the Labeler does and the errors it retries.
	Log logr.Logger
	// Backoff paces the retries of a failed API call; a zero Duration
	// means from one second, doubling, to at most thirty.
	Backoff wait.Backoff
}

// NeedLeaderElection makes the manager start the Labeler on standby
// replicas too: it has something to do before it leads.
func (l *Labeler) NeedLeaderElection() bool { return false }

// Start runs until ctx ends. It returns an error only when the Labeler
// cannot work at all: its own Pod does not exist or it may not read or
// patch it (a wrong --pod, or RBAC without leader_election_role.yaml).
func (l *Labeler) Start(ctx context.Context) error {
	if l.Pod.Name == "" || l.Pod.Namespace == "" {
		return errors.New("leader labels: the operator's own Pod is not known (--pod namespace/name)")
	}
	if err := l.retry(ctx, "removing a stale leader label from this replica's Pod", func(ctx context.Context) error {
		return l.setOwn(ctx, false)
	}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-l.Elected:
	}
	if err := l.retry(ctx, "labelling this replica's Pod as the leader", func(ctx context.Context) error {
		return l.setOwn(ctx, true)
	}); err != nil {
		return err
	}
	if err := l.retry(ctx, "removing the leader label from the other replicas' Pods", l.unlabelOthers); err != nil {
		return err
	}
	l.Log.Info("labelled this replica's Pod as the leader", "pod", l.Pod.String(), "label", Label)
	<-ctx.Done()

	// The manager is stopping: this replica serves no more downloads.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := l.setOwn(stopCtx, false); err != nil {
		l.Log.Error(err, "removing the leader label from this replica's Pod on the way out; the next leader removes it", "pod", l.Pod.String())
	}
	return nil
}

// setOwn adds or removes Label on the replica's own Pod.
func (l *Labeler) setOwn(ctx context.Context, leader bool) error {
	err := patchLabel(ctx, l.Client, l.Pod, leader)
	switch {
	case apierrors.IsNotFound(err):
		return permanent(fmt.Errorf("leader labels: Pod %s not found: --pod must name this replica's own Pod", l.Pod))
	case apierrors.IsForbidden(err):
		return permanent(fmt.Errorf("leader labels: %w (the operator needs get and patch on pods in its own namespace: the Role of config/rbac/leader_election_role.yaml, the chart's <release>-leader-election)", err))
	}
	return err
}

// unlabelOthers removes Label from every Pod of the installation but the
// replica's own.
func (l *Labeler) unlabelOthers(ctx context.Context) error {
	var own metav1.PartialObjectMetadata
	own.SetGroupVersionKind(podGVK)
	if err := l.Client.Get(ctx, l.Pod, &own); err != nil {
		return err
	}
	selector := client.MatchingLabels{Label: "true"}
	for _, key := range installationLabels {
		if v, ok := own.Labels[key]; ok {
			selector[key] = v
		}
	}
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(podListGVK)
	if err := l.Client.List(ctx, &pods, client.InNamespace(l.Pod.Namespace), selector); err != nil {
		if apierrors.IsForbidden(err) {
			return permanent(fmt.Errorf("leader labels: %w (the operator needs list on pods in its own namespace: the Role of config/rbac/leader_election_role.yaml, the chart's <release>-leader-election)", err))
		}
		return err
	}
	for _, p := range pods.Items {
		if p.Name == l.Pod.Name {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		switch err := patchLabel(ctx, l.Client, key, false); {
		case apierrors.IsNotFound(err):
			// Gone since the list: nothing to remove.
		case err != nil:
			return fmt.Errorf("Pod %s: %w", key, err)
		default:
			l.Log.Info("removed the leader label from another replica's Pod", "pod", key.String())
		}
	}
	return nil
}

// retry runs call until it succeeds, fails permanently or ctx ends (which
// is not an error: the manager is stopping).
func (l *Labeler) retry(ctx context.Context, what string, call func(context.Context) error) error {
	backoff := l.Backoff
	if backoff.Duration == 0 {
		backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
	}
	for {
		err := call(ctx)
		var p permanentError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &p):
			return p.err
		case ctx.Err() != nil:
			return nil
		}
		delay := backoff.Step()
		l.Log.Error(err, what+"; retrying", "pod", l.Pod.String(), "after", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// permanentError is a failure retrying cannot fix.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }

func permanent(err error) error { return permanentError{err: err} }

var (
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
	podListGVK = corev1.SchemeGroupVersion.WithKind("PodList")
)

// patchLabel sets Label to "true" on the Pod key, or removes it, with a
// merge patch that touches no other label.
func patchLabel(ctx context.Context, c client.Client, key types.NamespacedName, leader bool) error {
	value := any(nil)
	if leader {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{Label: value}}})
	if err != nil {
		return err
	}
	var pod metav1.PartialObjectMetadata
	pod.SetGroupVersionKind(podGVK)
	pod.Namespace, pod.Name = key.Namespace, key.Name
	return c.Patch(ctx, &pod, client.RawPatch(types.MergePatchType, patch))
}
