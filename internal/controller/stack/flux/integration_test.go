package flux

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/artifact"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
	"github.com/stackyard/stackyard/test/fluxsc"
	"github.com/stackyard/stackyard/test/gitserver"
)

// fluxTimeout bounds how long source-controller may take to reconcile a
// source from a server on loopback.
const fluxTimeout = time.Minute

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	return env.NewNamespace(t, "flux-")
}

// createSource creates a Flux source object of kind with spec and no
// status, labelled for sc when sc is not nil.
func createSource(t *testing.T, sc *fluxsc.Controller, ns, kind, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := fluxsc.NewSource(kind, ns, name, spec)
	if sc != nil {
		sc.Own(u)
	}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s: %v", kind, err)
	}
	return u
}

// mergePatch applies a JSON merge patch of patch to u.
func mergePatch(t *testing.T, u *unstructured.Unstructured, patch map[string]any) {
	t.Helper()
	data, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, data)); err != nil {
		t.Fatalf("patching %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// publish writes an ExternalArtifact's status as its producer would:
// Ready=ready for the current generation (the kind has no
// status.observedGeneration), and an artifact at url with digest.
func publish(t *testing.T, u *unstructured.Unstructured, ready metav1.ConditionStatus, url, digest, revision string) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	u.Object["status"] = map[string]any{
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

// program is the content of every source in TestResolveEachKind: a
// Pulumi project in infra/ named after the kind, and a file outside it.
func program(kind string) map[string][]byte {
	return map[string][]byte{
		"infra/Pulumi.yaml": []byte("name: " + strings.ToLower(kind) + "\nruntime: yaml\n"),
		"README.md":         []byte("outside the program"),
	}
}

// realSource is how TestResolveEachKind has Flux's source-controller
// produce a kind: a spec it fails on, what it then says, the patch that
// fixes the spec, and the artifact revision it then publishes.
type realSource struct {
	broken   map[string]any
	failure  string
	fix      map[string]any
	revision func(rev string) error
}

// TestResolveEachKind resolves each Flux source kind through its states,
// as they come: not there yet, created but not looked at by Flux, failed,
// and Ready with an artifact, which is then downloaded and checked against
// its digest. GitRepository, Bucket and OCIRepository are reconciled by
// Flux's real source-controller, from a git server, an S3 server and an
// OCI registry on loopback; it writes their status and serves their
// artifacts. An ExternalArtifact is never produced by source-controller,
// only by other controllers that publish artifacts of their own (Flux's
// source-watcher, for one), so the test writes its status as such a
// producer would and serves its tarball itself.
func TestResolveEachKind(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	sc := fluxsc.Start(t, env)

	gitRepo := gitserver.New(t).CreateRepo("app")
	commit := gitRepo.Commit("main", toStrings(program("GitRepository")))
	s3 := s3Bucket(t, ns, "app", "bucket-keys", program("Bucket"))
	registryHost := ociRegistry(t)
	manifest := pushProgram(t, registryHost, "app", "v1", program("OCIRepository"))

	exact := func(want string) func(string) error {
		return func(rev string) error {
			if rev != want {
				return errors.New("revision " + rev + ", want " + want)
			}
			return nil
		}
	}
	produced := map[string]realSource{
		"GitRepository": {
			broken:   map[string]any{"url": gitRepo.URL + "-missing", "interval": "1h", "ref": map[string]any{"branch": "main"}},
			failure:  "repository not found",
			fix:      map[string]any{"spec": map[string]any{"url": gitRepo.URL}},
			revision: exact("main@sha1:" + commit),
		},
		// The Bucket first holds the right access key ID with the wrong
		// secret key, which the S3 server refuses. (Flux's first request
		// is a HEAD of the bucket, whose answer has no body to name the
		// refused signature in.)
		"Bucket": {
			broken: map[string]any{
				"provider": "generic", "bucketName": "app", "endpoint": s3.Endpoint, "insecure": true,
				"region": "us-east-1", "interval": "1h", "secretRef": map[string]any{"name": "bucket-keys-wrong"},
			},
			failure: "Access Denied",
			fix:     map[string]any{"spec": map[string]any{"secretRef": map[string]any{"name": "bucket-keys"}}},
			revision: func(rev string) error {
				if !strings.HasPrefix(rev, "sha256:") {
					return errors.New("revision " + rev + ", want the sha256 of the bucket's index")
				}
				return nil
			},
		},
		"OCIRepository": {
			broken:   map[string]any{"url": "oci://" + registryHost + "/app", "insecure": true, "interval": "1h", "ref": map[string]any{"tag": "v0"}},
			failure:  "MANIFEST_UNKNOWN",
			fix:      map[string]any{"spec": map[string]any{"ref": map[string]any{"tag": "v1"}}},
			revision: exact("v1@" + manifest),
		},
	}

	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			name := strings.ToLower(kind)
			src := &shared.FluxSource{
				SourceRef: shared.FluxSourceReference{APIVersion: Group + "/v1", Kind: kind, Name: name},
				Dir:       "infra",
			}
			_, err := Resolve(ctx, env.Client, ns, src)
			wantKind(t, err, "waiting", "not found")

			var want fluxsc.ArtifactInfo
			if rs, ok := produced[kind]; ok {
				// Created unlabelled, it is not source-controller's yet:
				// as before Flux first looks at a new source.
				u := createSource(t, nil, ns, kind, name, rs.broken)
				_, err = Resolve(ctx, env.Client, ns, src)
				wantKind(t, err, "waiting", "no Ready condition")

				mergePatch(t, u, map[string]any{"metadata": map[string]any{"labels": map[string]any{fluxsc.LabelKey: sc.Label}}})
				fluxsc.Wait(t, env.Client, u, fluxTimeout, fluxsc.NotReady(rs.failure))
				_, err = Resolve(ctx, env.Client, ns, src)
				wantKind(t, err, "waiting", "is not ready")
				if err != nil && !strings.Contains(err.Error(), rs.failure) {
					t.Errorf("error %q does not pass on what Flux said (%q)", err, rs.failure)
				}

				mergePatch(t, u, rs.fix)
				u = fluxsc.Wait(t, env.Client, u, fluxTimeout, fluxsc.Ready)
				want = fluxsc.Artifact(u)
				if err := rs.revision(want.Revision); err != nil {
					t.Error(err)
				}
				if !strings.HasPrefix(want.URL, "http://"+sc.StorageAddr+"/") {
					t.Errorf("artifact URL %s is not source-controller's", want.URL)
				}
			} else {
				u := createSource(t, nil, ns, kind, name, map[string]any{})
				_, err = Resolve(ctx, env.Client, ns, src)
				wantKind(t, err, "waiting", "no Ready condition")

				url, digest := tarballServer(t, name, program(kind))
				publish(t, u, metav1.ConditionFalse, url, digest, "main@sha1:1")
				_, err = Resolve(ctx, env.Client, ns, src)
				wantKind(t, err, "waiting", "is not ready")

				publish(t, u, metav1.ConditionTrue, url, digest, "main@sha1:1")
				want = fluxsc.ArtifactInfo{URL: url, Digest: digest, Revision: "main@sha1:1"}
			}

			a, err := Resolve(ctx, env.Client, ns, src)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if a.URL != want.URL || a.Digest != want.Digest || a.Revision != want.Revision || a.Size == nil || *a.Size <= 0 {
				t.Errorf("artifact = %+v, want %+v with a size", a, want)
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

// toStrings converts file contents for gitserver.Repo.Commit.
func toStrings(files map[string][]byte) map[string]string {
	out := make(map[string]string, len(files))
	for k, v := range files {
		out[k] = string(v)
	}
	return out
}

func TestResolveUnservedVersion(t *testing.T) {
	ns := newNamespace(t)
	createSource(t, nil, ns, "GitRepository", "app", map[string]any{"url": "https://git.example/app.git", "interval": "5m"})
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
