package flux

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/artifact"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	return env.NewNamespace(t, "flux-")
}

// minimalSpecs are the smallest specs the real CRDs accept, per kind.
var minimalSpecs = map[string]map[string]any{
	"GitRepository":    {"url": "https://git.example/app.git", "interval": "5m"},
	"OCIRepository":    {"url": "oci://registry.example/app", "interval": "5m"},
	"Bucket":           {"bucketName": "app", "endpoint": "minio.example", "interval": "5m"},
	"ExternalArtifact": {},
}

// createSource creates a Flux source object of kind with no status.
func createSource(t *testing.T, ns, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       minimalSpecs[kind],
	}}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s: %v", kind, err)
	}
	return u
}

// publish writes status as Flux's source-controller would: observed the
// current generation, Ready=ready, and an artifact at url with digest.
func publish(t *testing.T, u *unstructured.Unstructured, ready metav1.ConditionStatus, url, digest, revision string) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	u.Object["status"] = map[string]any{
		"observedGeneration": u.GetGeneration(),
		"conditions": []any{map[string]any{
			"type": "Ready", "status": string(ready), "reason": "Succeeded",
			"message": "stored artifact for revision '" + revision + "'", "lastTransitionTime": now,
			"observedGeneration": u.GetGeneration(),
		}},
		"artifact": map[string]any{
			"path": strings.ToLower(u.GetKind()) + "/" + u.GetNamespace() + "/" + u.GetName() + "/x.tar.gz",
			"url":  url, "revision": revision, "digest": digest, "lastUpdateTime": now, "size": int64(42),
		},
	}
	if err := env.Client.Status().Update(context.Background(), u); err != nil {
		t.Fatalf("updating the status of %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// tarballServer serves a packed program at /<name>.tar.gz and returns its
// URL and digest.
func tarballServer(t *testing.T, name string, files map[string][]byte) (url, digest string) {
	t.Helper()
	data, err := artifact.Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	digest, _, _ = artifact.Digest(strings.NewReader(string(data)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+name+".tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + name + ".tar.gz", digest
}

func TestResolveEachKind(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			name := strings.ToLower(kind)
			src := &shared.FluxSource{
				SourceRef: shared.FluxSourceReference{APIVersion: Group + "/v1", Kind: kind, Name: name},
				Dir:       "infra",
			}
			_, err := Resolve(ctx, env.Client, ns, src)
			wantKind(t, err, "waiting", "not found")

			u := createSource(t, ns, kind, name)
			_, err = Resolve(ctx, env.Client, ns, src)
			wantKind(t, err, "waiting", "no Ready condition")

			url, digest := tarballServer(t, name, map[string][]byte{
				"infra/Pulumi.yaml": []byte("name: " + name + "\nruntime: yaml\n"),
			})
			publish(t, u, metav1.ConditionFalse, url, digest, "main@sha1:1")
			_, err = Resolve(ctx, env.Client, ns, src)
			wantKind(t, err, "waiting", "is not ready")

			publish(t, u, metav1.ConditionTrue, url, digest, "main@sha1:1")
			a, err := Resolve(ctx, env.Client, ns, src)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if a.URL != url || a.Digest != digest || a.Revision != "main@sha1:1" || a.Size == nil || *a.Size != 42 {
				t.Errorf("artifact = %+v", a)
			}
			res, err := source.FetchArtifact(ctx, filepath.Join(t.TempDir(), "src"), source.ArtifactSpec{URL: a.URL, Digest: a.Digest, Dir: src.Dir})
			if err != nil {
				t.Fatalf("FetchArtifact: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(res.Dir, "Pulumi.yaml")); err != nil || !strings.Contains(string(b), "name: "+name) {
				t.Errorf("Pulumi.yaml = %q, %v", b, err)
			}
		})
	}
}

func TestResolveUnservedVersion(t *testing.T) {
	ns := newNamespace(t)
	createSource(t, ns, "GitRepository", "app")
	_, err := Resolve(context.Background(), env.Client, ns, &shared.FluxSource{
		SourceRef: shared.FluxSourceReference{APIVersion: Group + "/v1alpha9", Kind: "GitRepository", Name: "app"},
	})
	wantKind(t, err, "waiting", "does not serve")
	var w *sreconcile.Waiting
	if errors.As(err, &w) && w.Interval() != NotServedInterval {
		t.Errorf("requeue after %v, want %v", w.Interval(), NotServedInterval)
	}
}

func TestWatchesServedKinds(t *testing.T) {
	mapper := env.Client.RESTMapper()
	objs, err := Watches(mapper)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	if got, want := strings.Join(kinds, ","), strings.Join(Kinds, ","); got != want {
		t.Errorf("watched kinds %s, want %s (all served by Flux %s)", got, want, "v1")
	}
}
