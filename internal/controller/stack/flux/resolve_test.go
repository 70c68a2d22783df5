package flux

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// wantKind fails the test unless err is of the reconcile type the outcome
// names ("ok", "waiting", "stalling", "generic") and mentions want.
func wantKind(t *testing.T, err error, outcome, want string) {
	t.Helper()
	var (
		w *sreconcile.Waiting
		s *sreconcile.Stalling
		g *sreconcile.Generic
	)
	got := "ok"
	switch {
	case errors.As(err, &s):
		got = "stalling"
		if s.Reason != sreconcile.StalledSpecInvalidReason {
			t.Errorf("Stalling reason = %q, want SpecInvalid", s.Reason)
		}
	case errors.As(err, &w):
		got = "waiting"
		if w.Reason != ReasonSourceUnavailable {
			t.Errorf("Waiting reason = %q, want %s", w.Reason, ReasonSourceUnavailable)
		}
	case errors.As(err, &g):
		got = "generic"
	case err != nil:
		got = "untyped"
	}
	if got != outcome {
		t.Fatalf("error %v is %s, want %s", err, got, outcome)
	}
	if err != nil && !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
}

func TestSourceGVK(t *testing.T) {
	ref := func(apiVersion, kind, name string) *shared.FluxSource {
		return &shared.FluxSource{SourceRef: shared.FluxSourceReference{APIVersion: apiVersion, Kind: kind, Name: name}}
	}
	tests := []struct {
		name    string
		src     *shared.FluxSource
		outcome string
		want    string
	}{
		{name: "git v1", src: ref("source.toolkit.fluxcd.io/v1", "GitRepository", "app"), outcome: "ok"},
		{name: "oci v1beta2", src: ref("source.toolkit.fluxcd.io/v1beta2", "OCIRepository", "app"), outcome: "ok"},
		{name: "bucket", src: ref("source.toolkit.fluxcd.io/v1", "Bucket", "app"), outcome: "ok"},
		{name: "external artifact", src: ref("source.toolkit.fluxcd.io/v1", "ExternalArtifact", "app"), outcome: "ok"},
		{name: "not set", src: nil, outcome: "stalling", want: "spec.fluxSource"},
		{name: "helm chart", src: ref("source.toolkit.fluxcd.io/v1", "HelmChart", "app"), outcome: "stalling", want: "spec.fluxSource.sourceRef.kind"},
		{name: "lower-case kind", src: ref("source.toolkit.fluxcd.io/v1", "gitrepository", "app"), outcome: "stalling", want: "spec.fluxSource.sourceRef.kind"},
		{name: "other group", src: ref("apps/v1", "GitRepository", "app"), outcome: "stalling", want: "spec.fluxSource.sourceRef.apiVersion"},
		{name: "no version", src: ref("source.toolkit.fluxcd.io", "GitRepository", "app"), outcome: "stalling", want: "spec.fluxSource.sourceRef.apiVersion"},
		{name: "garbage version", src: ref("a/b/c", "GitRepository", "app"), outcome: "stalling", want: "spec.fluxSource.sourceRef.apiVersion"},
		{name: "no name", src: ref("source.toolkit.fluxcd.io/v1", "GitRepository", ""), outcome: "stalling", want: "spec.fluxSource.sourceRef.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gvk, err := sourceGVK(tt.src)
			wantKind(t, err, tt.outcome, tt.want)
			if err == nil && (gvk.Group != Group || gvk.Kind != tt.src.SourceRef.Kind) {
				t.Errorf("gvk = %v", gvk)
			}
		})
	}
}

// fluxObject builds a source object with the given generation and status.
func fluxObject(generation int64, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "GitRepository",
		"metadata":   map[string]any{"name": "app", "namespace": "default", "generation": generation},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// readyStatus is a complete, Ready status with an artifact.
func readyStatus(observed int64, readyStatus string, artifact map[string]any) map[string]any {
	s := map[string]any{
		"observedGeneration": observed,
		"conditions": []any{
			map[string]any{"type": "Reconciling", "status": "False", "reason": "Succeeded", "message": ""},
			map[string]any{"type": "Ready", "status": readyStatus, "reason": "Succeeded", "message": "stored artifact for revision 'main@sha1:abc'"},
		},
	}
	if artifact != nil {
		s["artifact"] = artifact
	}
	return s
}

// fullArtifact is a Flux artifact with every field set.
func fullArtifact() map[string]any {
	return map[string]any{
		"path":           "gitrepository/default/app/abc.tar.gz",
		"url":            "http://source-controller.flux-system.svc.cluster.local./gitrepository/default/app/abc.tar.gz",
		"revision":       "main@sha1:abc",
		"digest":         "sha256:" + strings.Repeat("0", 64),
		"size":           int64(1234),
		"lastUpdateTime": "2025-01-02T03:04:05Z",
		"metadata":       map[string]any{"org.opencontainers.image.source": "git"},
	}
}

func TestArtifactOf(t *testing.T) {
	noDigest := fullArtifact()
	delete(noDigest, "digest")
	tests := []struct {
		name    string
		obj     *unstructured.Unstructured
		outcome string
		want    string
	}{
		{name: "ready", obj: fluxObject(2, readyStatus(2, "True", fullArtifact())), outcome: "ok"},
		{name: "no status", obj: fluxObject(1, nil), outcome: "waiting", want: "no Ready condition"},
		{name: "stale Ready condition, no observedGeneration", obj: fluxObject(2, map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(1)}},
			"artifact":   fullArtifact(),
		}), outcome: "waiting", want: "generation 2"},
		{name: "current Ready condition, no observedGeneration", obj: fluxObject(2, map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2)}},
			"artifact":   fullArtifact(),
		}), outcome: "ok"},
		{name: "stale generation", obj: fluxObject(3, readyStatus(2, "True", fullArtifact())), outcome: "waiting", want: "generation 3"},
		// As source-controller leaves a source it has failed to fetch.
		{name: "failed on the current generation", obj: fluxObject(2, map[string]any{
			"observedGeneration": int64(-1),
			"conditions": []any{map[string]any{
				"type": "Ready", "status": "False", "reason": "GitOperationFailed", "observedGeneration": int64(2),
				"message": "failed to checkout and determine revision: repository not found",
			}},
		}), outcome: "waiting", want: "is not ready: GitOperationFailed: failed to checkout and determine revision: repository not found"},
		{name: "failed on an older generation", obj: fluxObject(2, map[string]any{
			"observedGeneration": int64(-1),
			"conditions": []any{map[string]any{
				"type": "Ready", "status": "False", "reason": "GitOperationFailed", "observedGeneration": int64(1),
				"message": "repository not found",
			}},
		}), outcome: "waiting", want: "has not reconciled its generation 2 yet"},
		{name: "not ready", obj: fluxObject(1, readyStatus(1, "False", fullArtifact())), outcome: "waiting", want: "is not ready: Succeeded"},
		{name: "no ready condition", obj: fluxObject(1, map[string]any{"observedGeneration": int64(1), "artifact": fullArtifact()}), outcome: "waiting", want: "no Ready condition"},
		{name: "no artifact", obj: fluxObject(1, readyStatus(1, "True", nil)), outcome: "waiting", want: "has no artifact yet"},
		{name: "no digest", obj: fluxObject(1, readyStatus(1, "True", noDigest)), outcome: "waiting", want: "without a URL or digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := artifactOf(tt.obj, "Flux GitRepository default/app")
			wantKind(t, err, tt.outcome, tt.want)
			if err != nil {
				return
			}
			if a.URL != fullArtifact()["url"] || a.Revision != "main@sha1:abc" || a.Path == "" ||
				a.Digest != fullArtifact()["digest"] || a.Size == nil || *a.Size != 1234 ||
				!a.LastUpdateTime.Time.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) || a.Metadata["org.opencontainers.image.source"] != "git" {
				t.Errorf("artifact = %+v", a)
			}
		})
	}
}

func TestArtifactChanged(t *testing.T) {
	base := func() *unstructured.Unstructured { return fluxObject(1, readyStatus(1, "True", fullArtifact())) }
	newDigest := base()
	_ = unstructured.SetNestedField(newDigest.Object, "sha256:"+strings.Repeat("1", 64), "status", "artifact", "digest")
	newMessage := base()
	_ = unstructured.SetNestedSlice(newMessage.Object, []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "a new message"},
	}, "status", "conditions")
	notReady := fluxObject(1, readyStatus(1, "False", fullArtifact()))
	newGeneration := fluxObject(2, readyStatus(1, "True", fullArtifact()))
	lastHandled := base()
	_ = unstructured.SetNestedField(lastHandled.Object, "2025-01-01T00:00:00Z", "status", "lastHandledReconcileAt")

	tests := []struct {
		name string
		new  *unstructured.Unstructured
		want bool
	}{
		{name: "nothing", new: base(), want: false},
		{name: "condition message only", new: newMessage, want: false},
		{name: "lastHandledReconcileAt only", new: lastHandled, want: false},
		{name: "digest", new: newDigest, want: true},
		{name: "ready flips", new: notReady, want: true},
		{name: "new generation", new: newGeneration, want: true},
	}
	p := ArtifactChanged()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: tt.new}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
	if !p.Create(event.CreateEvent{Object: base()}) || !p.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("creation and deletion must pass")
	}
}
