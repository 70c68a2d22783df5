package flux

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Group is the API group of Flux's source kinds.
const Group = "source.toolkit.fluxcd.io"

// ReasonSourceUnavailable is the Reconciling reason of a Waiting error: the
// source exists (or will) but has no usable artifact yet. It is the same
// word as PKO's Stalled reason for an unavailable source.
const ReasonSourceUnavailable = pulumiv1.StalledSourceUnavailableReason

// NotServedInterval is how long a Stack waits before looking again when the
// cluster does not serve the referenced kind and version, e.g. while Flux is
// being installed; no watch event will announce it.
const NotServedInterval = time.Minute

// Kinds are the Flux source kinds whose artifact can hold a Pulumi
// program. HelmChart and HelmRepository publish Helm charts and indexes,
// which cannot, and are refused.
var Kinds = []string{"GitRepository", "OCIRepository", "Bucket", "ExternalArtifact"}

// fieldRef is the spec path of the reference, for messages.
const fieldRef = "spec.fluxSource.sourceRef"

// Resolve returns the artifact that the Flux source named by src publishes
// in namespace. The reader may be the manager's cached client when the
// source kinds are watched (see Watches), or its API reader otherwise.
// Errors are typed as the package documentation says.
func Resolve(ctx context.Context, c client.Reader, namespace string, src *shared.FluxSource) (*pulumiv1.Artifact, error) {
	gvk, err := sourceGVK(src)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: src.SourceRef.Name}, obj)
	what := fmt.Sprintf("Flux %s %s/%s", gvk.Kind, namespace, src.SourceRef.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, sreconcile.NewWaiting(ReasonSourceUnavailable, fmt.Errorf("%s not found", what), 0)
	case apimeta.IsNoMatchError(err):
		return nil, sreconcile.NewWaiting(ReasonSourceUnavailable,
			fmt.Errorf("%s: the cluster does not serve %s %s (is Flux installed?)", fieldRef, gvk.GroupVersion(), gvk.Kind), NotServedInterval)
	case err != nil:
		return nil, sreconcile.NewGeneric("", fmt.Errorf("reading %s: %w", what, err))
	}
	return artifactOf(obj, what)
}

// sourceGVK checks the reference and returns the kind to read.
func sourceGVK(src *shared.FluxSource) (schema.GroupVersionKind, error) {
	if src == nil {
		return schema.GroupVersionKind{}, stalling("spec.fluxSource: not set")
	}
	ref := src.SourceRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != Group || gv.Version == "" {
		return schema.GroupVersionKind{}, stalling("%s.apiVersion %q: must be %s/<version>, e.g. %s/v1", fieldRef, ref.APIVersion, Group, Group)
	}
	if !slices.Contains(Kinds, ref.Kind) {
		return schema.GroupVersionKind{}, stalling("%s.kind %q: not a supported Flux source; use one of %s", fieldRef, ref.Kind, strings.Join(Kinds, ", "))
	}
	if ref.Name == "" {
		return schema.GroupVersionKind{}, stalling("%s.name: must not be empty", fieldRef)
	}
	return gv.WithKind(ref.Kind), nil
}

// stalling returns a SpecInvalid Stalling error.
func stalling(format string, args ...any) error {
	return sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, fmt.Errorf(format, args...))
}

// waiting returns a SourceUnavailable Waiting error at the default interval.
func waiting(format string, args ...any) error {
	return sreconcile.NewWaiting(ReasonSourceUnavailable, fmt.Errorf(format, args...), 0)
}

// artifactOf reads a source object's status: it must be Ready, have
// observed its latest generation (when it records which it observed), and
// publish an artifact with a URL and a digest. what names the object in
// messages.
func artifactOf(obj *unstructured.Unstructured, what string) (*pulumiv1.Artifact, error) {
	ready := readyCondition(obj)
	if ready == nil {
		return nil, waiting("%s is not ready: it has no Ready condition yet", what)
	}
	// Flux's own kinds record status.observedGeneration, but only for a
	// generation they reconciled successfully (or stalled on): a source
	// that fails keeps the last one (-1 while it never succeeded), and its
	// Ready condition carries the generation it failed on, whose message
	// is the one to pass on. An ExternalArtifact has only the condition's.
	gen := obj.GetGeneration()
	observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	current := ready.ObservedGeneration >= gen || (found && observed >= gen) || (!found && ready.ObservedGeneration == 0)
	if !current {
		return nil, waiting("%s has not reconciled its generation %d yet", what, gen)
	}
	if ready.Status != metav1.ConditionTrue {
		return nil, waiting("%s is not ready: %s: %s", what, ready.Reason, ready.Message)
	}
	art, found, err := unstructured.NestedMap(obj.Object, "status", "artifact")
	if err != nil || !found {
		return nil, waiting("%s has no artifact yet", what)
	}
	str := func(field string) string { s, _, _ := unstructured.NestedString(art, field); return s }
	a := &pulumiv1.Artifact{
		Path:     str("path"),
		URL:      str("url"),
		Revision: str("revision"),
		Digest:   str("digest"),
	}
	if a.URL == "" || a.Digest == "" {
		return nil, waiting("%s has an artifact without a URL or digest", what)
	}
	if size, found, err := unstructured.NestedInt64(art, "size"); found && err == nil {
		a.Size = &size
	}
	if t, err := time.Parse(time.RFC3339, str("lastUpdateTime")); err == nil {
		a.LastUpdateTime = metav1.NewTime(t)
	}
	if md, found, err := unstructured.NestedStringMap(art, "metadata"); found && err == nil && len(md) > 0 {
		a.Metadata = md
	}
	return a, nil
}

// readyCondition returns the object's Ready condition, or nil.
func readyCondition(obj *unstructured.Unstructured) *metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		gen, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		return &metav1.Condition{Type: "Ready", Status: metav1.ConditionStatus(status), Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	return nil
}
