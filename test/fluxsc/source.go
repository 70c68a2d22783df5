package fluxsc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReconcileRequestAnnotation is the annotation through which Flux is asked
// to reconcile a source now (what `flux reconcile source` sets); the
// controller echoes the value it handled in status.lastHandledReconcileAt.
const ReconcileRequestAnnotation = "reconcile.fluxcd.io/requestedAt"

// NewSource returns a Flux source object of kind (GitRepository, Bucket,
// OCIRepository, ...) in namespace with spec, not yet created and not
// labelled for any controller (see Controller.Own).
func NewSource(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

// RequestReconcile asks the controller to reconcile the source now, without
// waiting for its interval, and returns the request's value, which Handled
// waits for.
func RequestReconcile(ctx context.Context, c client.Client, obj *unstructured.Unstructured) (string, error) {
	value := time.Now().UTC().Format(time.RFC3339Nano)
	patch := client.MergeFrom(obj.DeepCopy())
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ReconcileRequestAnnotation] = value
	obj.SetAnnotations(annotations)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return "", fmt.Errorf("requesting a reconcile of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return value, nil
}

// Check judges a source's state for Wait: nil when it is what the test
// waits for, else what is missing.
type Check func(u *unstructured.Unstructured) error

// Wait reads the source every 100ms until check accepts it, and returns it;
// the test fails after timeout with what check last said.
func Wait(t testing.TB, c client.Client, obj *unstructured.Unstructured, timeout time.Duration, check Check) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(obj.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), u)
		if err == nil {
			if err = check(u); err == nil {
				return u
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s/%s after %s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ready accepts a source that has reconciled its latest generation and is
// Ready with an artifact.
func Ready(u *unstructured.Unstructured) error {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return fmt.Errorf("observed generation %d, not yet %d", observed, u.GetGeneration())
	}
	status, reason, message, _ := condition(u, "Ready")
	if status != "True" {
		return fmt.Errorf("not Ready: %s %s: %s", status, reason, message)
	}
	if Artifact(u).Revision == "" {
		return errors.New("Ready without an artifact")
	}
	return nil
}

// NotReady returns a Check that accepts a source that has reconciled its
// latest generation and failed: Ready=False with a message containing
// want.
func NotReady(want string) Check {
	return func(u *unstructured.Unstructured) error {
		// Flux leaves status.observedGeneration behind after a failure;
		// the Ready condition says which generation it failed on.
		status, reason, message, observed := condition(u, "Ready")
		switch {
		case status != "False":
			return fmt.Errorf("Ready is %q (%s: %s), want False", status, reason, message)
		case observed != u.GetGeneration():
			return fmt.Errorf("Ready=False for generation %d, not yet %d", observed, u.GetGeneration())
		case !strings.Contains(message, want):
			return fmt.Errorf("Ready=False %s: %q does not mention %q", reason, message, want)
		}
		return nil
	}
}

// Handled returns a Check that accepts a Ready source which has handled
// the reconcile request requested (see RequestReconcile).
func Handled(requested string) Check {
	return func(u *unstructured.Unstructured) error {
		handled, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
		if handled != requested {
			return fmt.Errorf("handled reconcile request %q, not yet %q", handled, requested)
		}
		return Ready(u)
	}
}

// Revision returns a Check that accepts a Ready source whose artifact has
// revision.
func Revision(revision string) Check {
	return func(u *unstructured.Unstructured) error {
		if err := Ready(u); err != nil {
			return err
		}
		if got := Artifact(u).Revision; got != revision {
			return fmt.Errorf("artifact revision %q, not yet %q", got, revision)
		}
		return nil
	}
}

// ArtifactInfo is what a source's status says of its artifact.
type ArtifactInfo struct {
	URL, Revision, Digest, Path string
}

// Artifact returns the source's status.artifact; the zero value when it has
// none.
func Artifact(u *unstructured.Unstructured) ArtifactInfo {
	field := func(name string) string {
		s, _, _ := unstructured.NestedString(u.Object, "status", "artifact", name)
		return s
	}
	return ArtifactInfo{URL: field("url"), Revision: field("revision"), Digest: field("digest"), Path: field("path")}
}

// condition returns the status, reason, message and observed generation of
// the source's condition of type typ; zero values when it has none.
func condition(u *unstructured.Unstructured, typ string) (status, reason, message string, observed int64) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		observed, _, _ = unstructured.NestedInt64(m, "observedGeneration")
		return status, reason, message, observed
	}
	return "", "", "", 0
}
