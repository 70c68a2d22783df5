package promotion_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// diffProject is a program whose releases differ, from one version to the
// next, in a plain value (page's content), a value derived from a secret
// (secretPage's content: the version and the secret token), a nested
// object and array (id's keepers, which force id's replacement) and a
// property that forces a replacement (moved's path).
func diffProject(version string) string {
	return fmt.Sprintf(`name: web
runtime: yaml
config:
  path:
    type: string
  token:
    type: string
    secret: true
resources:
  page:
    type: stackyardtest:index:File
    properties:
      path: ${path}
      content: %[1]s
  secretPage:
    type: stackyardtest:index:File
    properties:
      path: ${path}.secret
      content: %[1]s-${token}
  id:
    type: stackyardtest:index:Random
    properties:
      length: 8
      keepers:
        nested:
          version: %[1]s
          list: [1, "%[1]s"]
  moved:
    type: stackyardtest:index:File
    properties:
      path: ${path}.%[1]s
      content: moved
`, version)
}

// TestValueDiff previews a release that changes each kind of value, and
// reads the value diff the promotion keeps with its plan: old → new for
// plain values, leaf by leaf for nested ones, the replacements marked,
// and "[secret]" on both sides of the changed secret. The secret's
// plaintext is in no object, event or log.
func TestValueDiff(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const token = "diff-token-8c41e"
	a := awaitTokenApproval(t, diffProject, token, false)
	ns, p := a.ns, a.p
	g.Expect(previewsOf(g, p)).To(HaveLen(1))
	g.Expect(previewsOf(g, p)[0].Changes).To(ContainElement(SatisfyAll(
		HaveField("Type", "stackyardtest:index:Random"), HaveField("Op", "replace"))))

	plan := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: previewsOf(g, p)[0].Plan}, plan)).To(Succeed())
	d, err := valuediff.Decode(plan.Data[autov1alpha1.DiffKey])
	g.Expect(err).NotTo(HaveOccurred())
	prop := func(urnSuffix, op string) []valuediff.Property {
		for _, r := range d.Resources {
			if strings.HasSuffix(r.URN, urnSuffix) && r.Op == op {
				return r.Properties
			}
		}
		t.Fatalf("no %s of %s in the diff: %+v", op, urnSuffix, d)
		return nil
	}
	g.Expect(prop("File::page", "update")).To(ConsistOf(valuediff.Property{Path: "content", Kind: "update", Old: `"v1"`, New: `"v2"`}))
	g.Expect(prop("File::secretPage", "update")).To(ConsistOf(valuediff.Property{Path: "content", Kind: "update", Old: `"[secret]"`, New: `"[secret]"`}))
	g.Expect(prop("Random::id", "replace")).To(ConsistOf(
		valuediff.Property{Path: "keepers.nested.list[1]", Kind: "update", Old: `"v1"`, New: `"v2"`, Replaces: true},
		valuediff.Property{Path: "keepers.nested.version", Kind: "update", Old: `"v1"`, New: `"v2"`, Replaces: true},
	))
	g.Expect(prop("File::moved", "replace")).To(ContainElement(SatisfyAll(
		HaveField("Path", "path"), HaveField("Replaces", true),
		HaveField("Old", HaveSuffix(`.v1"`)), HaveField("New", HaveSuffix(`.v2"`)))))

	// The CLI's review shows the same, as text and as JSON.
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())
	review, err := admin.Review(ctx, "to-prod", true)
	g.Expect(err).NotTo(HaveOccurred())
	var text, js bytes.Buffer
	g.Expect(pipelinectl.WriteReview(&text, review)).To(Succeed())
	g.Expect(pipelinectl.PrintObject(&js, "json", review)).To(Succeed())
	g.Expect(text.String()).To(SatisfyAll(
		ContainSubstring(`~ content: "v1" => "v2"`),
		ContainSubstring(`~ content: "[secret]" => "[secret]"`),
		ContainSubstring(`~ keepers.nested.version: "v1" => "v2" (forces replacement)`),
		ContainSubstring("+- replace urn:pulumi:dev::web::stackyardtest:index:Random::id"),
	), text.String())
	g.Expect(js.String()).To(SatisfyAll(ContainSubstring(`"apiVersion": "cli.stackyard.dev/v1"`), ContainSubstring(`"kind": "PromotionReview"`)))

	// The secret's plaintext is nowhere: not in the diff, the review, the
	// Updates, the promotion, the events or the operator's log.
	var texts []string
	texts = append(texts, string(plan.Data[autov1alpha1.DiffKey]), describe(p), logs.String(), text.String(), js.String())
	var upds autov1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &upds, client.InNamespace(ns))).To(Succeed())
	for _, u := range upds.Items {
		texts = append(texts, fmt.Sprintf("%+v", u.Status))
	}
	var events corev1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		texts = append(texts, e.Message)
	}
	for _, text := range texts {
		g.Expect(text).NotTo(ContainSubstring(token), "the secret leaked")
	}
}

// TestSourceChange promotes a release of a program kept under infra/ of
// its repository, then an older release back: each promotion records the
// commits between what the Stack ran and the release (newest first; taken
// out, for the way back), the files changed under the Stack's repoDir
// (never those outside it), and keeps the unified diff with its plan.
func TestSourceChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1 := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": project("v1"), "README.md": "one"})
	mid := repo.Commit("main", map[string]string{"README.md": "two"})
	c2 := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": project("v2")})
	s, file := gitStack(t, ns, "web", repo.URL, c1)
	s.Spec.GitSource.RepoDir = "infra"
	create(t, s)
	deployed(t, ns, "web", c1)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now().Add(-time.Hour)))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "prod", []string{"web"}, nil))

	patchOf := func(p *promotionv1alpha1.Promotion) string {
		plan := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: previewsOf(g, p)[0].Plan}, plan)).To(Succeed())
		return string(plan.Data[promotionv1alpha1.SourcePatchKey])
	}
	create(t, askFor(ns, "forward", "prod", "r2", false))
	fwd := waitFinished(t, ns, "forward", opTimeout)
	g.Expect(fwd.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(fwd))
	g.Expect(readFile(g, file)).To(Equal("v2"))
	src := previewsOf(g, fwd)[0].Source
	g.Expect(src).NotTo(BeNil())
	g.Expect(src.Message).To(BeEmpty())
	g.Expect(*src).To(SatisfyAll(
		HaveField("From", c1), HaveField("To", c2), HaveField("Reverse", false), HaveField("CommitCount", int32(2)),
		HaveField("Paths", ConsistOf("infra/Pulumi.yaml")), HaveField("PathCount", int32(1)),
	))
	g.Expect(src.Commits).To(HaveExactElements(HaveField("SHA", c2), HaveField("SHA", mid)))
	g.Expect(src.Commits[0].Author).NotTo(BeEmpty())
	g.Expect(src.Commits[0].Time).NotTo(BeNil())
	g.Expect(patchOf(fwd)).To(SatisfyAll(ContainSubstring("-      content: v1"), ContainSubstring("+      content: v2"), Not(ContainSubstring("README"))))
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())
	review, err := admin.Review(ctx, "forward", true)
	g.Expect(err).NotTo(HaveOccurred())
	var text bytes.Buffer
	g.Expect(pipelinectl.WriteReview(&text, review)).To(Succeed())
	g.Expect(text.String()).To(SatisfyAll(
		ContainSubstring(fmt.Sprintf("code %s..%s brings 2 commit(s):", c1[:7], c2[:7])),
		ContainSubstring("files changed under the Stack's directory: 1\n    infra/Pulumi.yaml"),
		ContainSubstring("+      content: v2"),
	), text.String())

	create(t, askFor(ns, "back", "prod", "r1", false))
	back := waitFinished(t, ns, "back", opTimeout)
	g.Expect(back.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(back))
	g.Expect(readFile(g, file)).To(Equal("v1"))
	src = previewsOf(g, back)[0].Source
	g.Expect(*src).To(SatisfyAll(HaveField("From", c2), HaveField("To", c1), HaveField("Reverse", true), HaveField("CommitCount", int32(2))))
	g.Expect(patchOf(back)).To(SatisfyAll(ContainSubstring("-      content: v2"), ContainSubstring("+      content: v1")))
}
