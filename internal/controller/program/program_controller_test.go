package program

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/source"
	"github.com/stackyard/stackyard/test/testenv"
)

const timeout = 20 * time.Second

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	return env.NewNamespace(t, "program-")
}

// seedProgram reads the Program of PKO's documentation from the seed
// manifests, into namespace ns.
func seedProgram(t *testing.T, ns string) *pulumiv1.Program {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "test", "seeds", "testdata", "valid", "operator-docs-program-staticwebsite.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &pulumiv1.Program{}
	if err := sigsyaml.UnmarshalStrict(data, p); err != nil {
		t.Fatal(err)
	}
	p.Namespace = ns
	return p
}

// packaged waits until the Program's status publishes the artifact of its
// current generation, and returns the Program.
func packaged(g Gomega, key client.ObjectKey) *pulumiv1.Program {
	p := &pulumiv1.Program{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(p.Status.Artifact).NotTo(BeNil())
		g.Expect(p.Status.Artifact.Revision).To(Equal(Revision(p.Generation)))
	}, timeout, 50*time.Millisecond).Should(Succeed())
	return p
}

// fetchProject downloads the artifact with the digest check of
// source.FetchArtifact and returns its Pulumi.yaml, parsed.
func fetchProject(t *testing.T, a *pulumiv1.Artifact) map[string]any {
	t.Helper()
	res, err := source.FetchArtifact(context.Background(), filepath.Join(t.TempDir(), "src"), source.ArtifactSpec{URL: a.URL, Digest: a.Digest})
	if err != nil {
		t.Fatalf("FetchArtifact(%s): %v", a.URL, err)
	}
	data, err := os.ReadFile(filepath.Join(res.Dir, ProjectFile))
	if err != nil {
		t.Fatal(err)
	}
	var project map[string]any
	if err := yaml.Unmarshal(data, &project); err != nil {
		t.Fatalf("%s is not valid YAML: %v\n%s", ProjectFile, err, data)
	}
	return project
}

// httpStatus returns the status of a GET of url.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// storedRevisions lists the Program's revisions in the store.
func storedRevisions(g Gomega, p *pulumiv1.Program) []string {
	revs, err := store.Revisions(key(p))
	g.Expect(err).NotTo(HaveOccurred())
	return revs
}

func TestProgramLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := seedProgram(t, ns)
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	objKey := client.ObjectKeyFromObject(p)

	// Generation 1: packaged, served, and a valid Pulumi YAML project.
	p = packaged(g, objKey)
	a1 := p.Status.Artifact.DeepCopy()
	g.Expect(p.Finalizers).To(ContainElement(Finalizer))
	g.Expect(a1.Path).To(Equal("program/" + ns + "/staticwebsite/1.tar.gz"))
	g.Expect(a1.URL).To(Equal(store.URL(a1.Path)))
	g.Expect(a1.Digest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(a1.Size).NotTo(BeNil())
	g.Expect(a1.LastUpdateTime.IsZero()).To(BeFalse())

	project := fetchProject(t, a1)
	g.Expect(project["name"]).To(Equal("staticwebsite"))
	g.Expect(project["runtime"]).To(Equal("yaml"))
	resources, _ := project["resources"].(map[string]any)
	g.Expect(resources).To(HaveLen(len(p.Program.Resources)))
	for name, r := range p.Program.Resources {
		g.Expect(resources).To(HaveKeyWithValue(name, HaveKeyWithValue("type", r.Type)))
	}
	g.Expect(resources["my-bucket-acl"]).To(HaveKeyWithValue("options", HaveKeyWithValue("dependsOn", ConsistOf("${my-bucket-ownership-controls}"))))
	g.Expect(resources["index.html"]).To(HaveKeyWithValue("properties", HaveKeyWithValue("source", HaveKeyWithValue("fn::stringAsset", "<h1>Hello, world!</h1>"))))
	g.Expect(project["outputs"]).To(HaveKeyWithValue("bucketEndpoint", "http://${my-bucket-website.websiteEndpoint}"))

	// Unchanged generation: a reconcile request after losing the file
	// (say, a restart with an empty volume) rebuilds the same bytes, and
	// status does not move.
	g.Expect(os.Remove(filepath.Join(store.Dir(), filepath.FromSlash(a1.Path)))).To(Succeed())
	patch := client.MergeFrom(p.DeepCopy())
	p.Annotations = map[string]string{pulumiv1.ReconcileRequestAnnotation: "now"}
	g.Expect(env.Client.Patch(ctx, p, patch)).To(Succeed())
	g.Eventually(func() int { return httpStatus(t, a1.URL) }, timeout, 50*time.Millisecond).Should(Equal(http.StatusOK))
	fetchProject(t, a1) // same digest as published
	g.Expect(env.Client.Get(ctx, objKey, p)).To(Succeed())
	g.Expect(p.Generation).To(Equal(int64(1)))
	g.Expect(p.Status.Artifact).To(Equal(a1))
	g.Expect(storedRevisions(g, p)).To(Equal([]string{"1"}))

	// Generation 2: a new artifact with a new digest; generation 1 is
	// kept as the previous one.
	p.Program.Outputs["region"] = apiextensionsv1.JSON{Raw: []byte(`"${my-bucket.region}"`)}
	g.Expect(env.Client.Update(ctx, p)).To(Succeed())
	p = packaged(g, objKey)
	a2 := p.Status.Artifact.DeepCopy()
	g.Expect(a2.Digest).NotTo(Equal(a1.Digest))
	g.Expect(a2.URL).NotTo(Equal(a1.URL))
	g.Expect(fetchProject(t, a2)["outputs"]).To(HaveKey("region"))
	g.Expect(storedRevisions(g, p)).To(Equal([]string{"1", "2"}))
	g.Expect(httpStatus(t, a1.URL)).To(Equal(http.StatusOK))

	// Generation 3: generation 1 is collected, 2 and 3 stay.
	delete(p.Program.Outputs, "region")
	g.Expect(env.Client.Update(ctx, p)).To(Succeed())
	p = packaged(g, objKey)
	a3 := p.Status.Artifact.DeepCopy()
	g.Expect(a3.Digest).To(Equal(a1.Digest), "the same program renders to the same bytes")
	g.Eventually(func(g Gomega) []string { return storedRevisions(g, p) }, timeout).Should(Equal([]string{"2", "3"}))
	g.Expect(httpStatus(t, a1.URL)).To(Equal(http.StatusNotFound))

	g.Expect(eventsFor(g, ns, p.Name, EventArtifactUpdated)).To(HaveLen(3))

	// Deletion removes every artifact, then the Program.
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, objKey, &pulumiv1.Program{}))
	}, timeout, 50*time.Millisecond).Should(BeTrue())
	g.Expect(storedRevisions(g, p)).To(BeEmpty())
	g.Expect(httpStatus(t, a3.URL)).To(Equal(http.StatusNotFound))
}

func TestProgramStalledOnInvalidProgram(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := &pulumiv1.Program{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns},
		Program: pulumiv1.ProgramSpec{
			Configuration: map[string]pulumiv1.Configuration{
				"replicas": {Type: "Number", Default: &apiextensionsv1.JSON{Raw: []byte(`"three"`)}},
			},
			Resources: map[string]pulumiv1.Resource{"bucket": {Type: "aws:s3:BucketV2"}},
		},
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	objKey := client.ObjectKeyFromObject(p)

	// The generation is handled (stalled): observed, no artifact, and a
	// Warning event naming the field.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, objKey, p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	}, timeout, 50*time.Millisecond).Should(Succeed())
	g.Expect(p.Status.Artifact).To(BeNil())
	g.Eventually(func(g Gomega) []eventsv1.Event {
		return eventsFor(g, ns, "bad", pulumiv1.StalledSpecInvalidReason)
	}, timeout, 50*time.Millisecond).Should(ContainElement(And(
		HaveField("Type", corev1.EventTypeWarning),
		HaveField("Note", ContainSubstring("program.configuration.replicas.default")),
	)))
	g.Expect(storedRevisions(g, p)).To(BeEmpty())

	// Fixing the program packages the new generation.
	p.Program.Configuration["replicas"] = pulumiv1.Configuration{Type: "Number", Default: &apiextensionsv1.JSON{Raw: []byte(`3`)}}
	g.Expect(env.Client.Update(ctx, p)).To(Succeed())
	p = packaged(g, objKey)
	g.Expect(fetchProject(t, p.Status.Artifact)["configuration"]).To(HaveKeyWithValue("replicas", HaveKeyWithValue("default", 3)))
	g.Expect(strings.HasSuffix(p.Status.Artifact.Path, "/2.tar.gz")).To(BeTrue())
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, objKey, &pulumiv1.Program{}))
	}, timeout, 50*time.Millisecond).Should(BeTrue())
}

// eventsFor returns the events about the Program name in ns with reason.
func eventsFor(g Gomega, ns, name, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
