package stack_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/artifact"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/controller/workspace"
)

// fluxAPIVersion is the version of Flux's source API the test objects use.
const fluxAPIVersion = "source.toolkit.fluxcd.io/v1"

// artifactHost serves tarballs the way Flux's source-controller serves
// artifacts: each at its own path, never changed once published.
type artifactHost struct {
	mu    sync.Mutex
	files map[string][]byte
	srv   *httptest.Server
}

func newArtifactHost(t *testing.T) *artifactHost {
	h := &artifactHost{files: map[string][]byte{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		data, ok := h.files[r.URL.Path]
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, filepath.Base(r.URL.Path), time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// publish packs files into a tarball served at path and returns its URL
// and digest.
func (h *artifactHost) publish(t *testing.T, path string, files map[string]string) (url, digest string) {
	t.Helper()
	content := map[string][]byte{}
	for name, text := range files {
		content[name] = []byte(text)
	}
	data, err := artifact.Pack(content)
	if err != nil {
		t.Fatal(err)
	}
	digest, _, err = artifact.Digest(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.files[path] = data
	h.mu.Unlock()
	return h.srv.URL + path, digest
}

// setFluxArtifact writes a GitRepository's status as Flux's
// source-controller does once it has stored an artifact: observed its
// generation, Ready=True, and the artifact.
func setFluxArtifact(t *testing.T, ns, name, url, digest, revision string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	repo := &unstructured.Unstructured{}
	repo.SetAPIVersion(fluxAPIVersion)
	repo.SetKind("GitRepository")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, repo)).To(Succeed())
	now := time.Now().UTC().Format(time.RFC3339)
	repo.Object["status"] = map[string]any{
		"observedGeneration": repo.GetGeneration(),
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "Succeeded",
			"message":            "stored artifact for revision '" + revision + "'",
			"lastTransitionTime": now, "observedGeneration": repo.GetGeneration(),
		}},
		"artifact": map[string]any{
			"path":     "gitrepository/" + ns + "/" + name + "/" + digest[len(digest)-12:] + ".tar.gz",
			"url":      url,
			"revision": revision,
			"digest":   digest,
			// lastUpdateTime is required by the CRD.
			"lastUpdateTime": now,
		},
	}
	g.Expect(env.Client.Status().Update(ctx, repo)).To(Succeed())
}

// TestFluxSourceStack deploys a program published by a Flux GitRepository
// (the real CRD; its status is written here as source-controller writes
// it): the Stack deploys the artifact and records its revision as the
// attempted and successful commit, and when the GitRepository publishes a
// new artifact the Stack deploys that one, woken by the source's watch:
// the Stack's own next look is an hour away, and the new artifact is
// published only once its Workspace has gone idle, the last change of the
// objects it owns that would wake it.
func TestFluxSourceStack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "page.txt")
	host := newArtifactHost(t)

	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fluxAPIVersion,
		"kind":       "GitRepository",
		"metadata":   map[string]any{"name": "infra", "namespace": ns},
		"spec":       map[string]any{"url": "https://git.example/infra.git", "interval": "5m", "ref": map[string]any{"branch": "main"}},
	}}
	g.Expect(env.Client.Create(ctx, repo)).To(Succeed())
	const rev1 = "main@sha1:1111111111111111111111111111111111111111"
	url, digest := host.publish(t, "/gitrepository/infra/one.tar.gz", map[string]string{
		"deploy/Pulumi.yaml": fileProgram("flux", target, "first artifact", 0),
		"README.md":          "outside the program's directory",
	})
	setFluxArtifact(t, ns, "infra", url, digest, rev1)

	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "flux", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:   "dev",
			Backend: backendURL(t, dir),
			FluxSource: &shared.FluxSource{
				SourceRef: shared.FluxSourceReference{APIVersion: fluxAPIVersion, Kind: "GitRepository", Name: "infra"},
				Dir:       "deploy",
			},
			ResyncFrequencySeconds: 3600,
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "flux", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("first artifact"))
	g.Expect(s.Status.LastUpdate.LastAttemptedCommit).To(Equal(rev1))
	g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(rev1))
	g.Eventually(func(g Gomega) {
		active := apimeta.FindStatusCondition(getWorkspace(g, ns, "flux").Status.Conditions, workspace.ConditionActive)
		g.Expect(active).NotTo(BeNil())
		g.Expect(active.Reason).To(Equal(workspace.ReasonIdle))
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), "the Workspace never went idle")

	// Flux publishes a new revision: a new tarball at a new path.
	const rev2 = "main@sha1:2222222222222222222222222222222222222222"
	url, digest = host.publish(t, "/gitrepository/infra/two.tar.gz", map[string]string{
		"deploy/Pulumi.yaml": fileProgram("flux", target, "second artifact", 0),
	})
	setFluxArtifact(t, ns, "infra", url, digest, rev2)
	s = waitStack(t, ns, "flux", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(rev2))
	})
	g.Expect(readFile(g, target)).To(Equal("second artifact"))
	g.Expect(s.Status.LastUpdate.LastAttemptedCommit).To(Equal(rev2))
	g.Expect(s.Status.History).To(HaveLen(2))
	g.Expect(s.Status.History[0].Trigger).To(Equal(string(stack.TriggerRevision)))
	g.Expect(s.Status.History[0].Commit).To(Equal(rev2))
}
