package pipeline

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/gitserver"
)

// t0 is the first commit time of the tests' repositories.
var t0 = time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)

// commitAt commits files on main at t0 plus the given minutes.
func commitAt(repo *gitserver.Repo, minutes int, msg string, files map[string]string) string {
	return repo.CommitWith("main", files, gitserver.CommitOptions{
		Message: msg, Author: "Grace Hopper <grace@example.com>", Time: t0.Add(time.Duration(minutes) * time.Minute),
	})
}

// newRepo starts a git server for the test, with a repository "app"
// holding n commits (see commitsOn), and makes a namespace.
func newRepo(t *testing.T, n int) (ns string, srv *gitserver.Server, repo *gitserver.Repo, shas []string) {
	t.Helper()
	srv = gitserver.New(t)
	repo = srv.CreateRepo("app")
	return env.NewNamespace(t, "pipeline-"), srv, repo, commitsOn(repo, n)
}

// commitsOn makes n commits on main, a minute apart from t0, with
// subjects "A", "B", …, and returns their SHAs, oldest first.
func commitsOn(repo *gitserver.Repo, n int) []string {
	shas := make([]string, n)
	for i := range shas {
		subject := string(rune('A' + i))
		shas[i] = commitAt(repo, i, subject, map[string]string{"f": subject})
	}
	return shas
}

// released checks that p's Releases are those of shas, newest first:
// the first is p's latest release. It returns them by SHA.
func released(g Gomega, p *promotionv1alpha1.Pipeline, shas ...string) map[string]promotionv1alpha1.Release {
	rels := releasesOf(g, p.Namespace, p.Name)
	g.Expect(slices.Collect(maps.Keys(rels))).To(ConsistOf(shas))
	g.Expect(p.Status.LatestRelease).To(Equal(ReleaseName(p.Name, shas[0])))
	return rels
}

// ready checks that a Pipeline is Ready for its generation.
func ready(g Gomega, p *promotionv1alpha1.Pipeline) {
	g.Expect(apimeta.IsStatusConditionTrue(p.Status.Conditions, sreconcile.ReadyCondition)).To(BeTrue())
	g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
}

func TestBranchCommitsBecomeReleases(t *testing.T) {
	t.Parallel()
	ns, _, repo, _ := newRepo(t, 0)
	long := "Long message\n\n" + strings.Repeat("ü", 3000)
	c1 := commitAt(repo, 0, "Initial program", map[string]string{"Pulumi.yaml": "name: app\n"})
	c2 := commitAt(repo, 1, "Add a bucket\n\nThe bucket holds the logs.", map[string]string{"main.yaml": "a"})
	c3 := commitAt(repo, 2, long, map[string]string{"main.yaml": "b"})
	p := pipelineOn(ns, "web", repo.URL, nil)
	create(t, p)

	got := waitPipeline(t, ns, "web", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		released(g, p, c3, c2, c1)
	})
	if got.Status.LastDiscoveryTime == nil {
		t.Error("no lastDiscoveryTime")
	}
	g := NewWithT(t)
	rels := releasesOf(g, ns, "web")
	rel := rels[c2]
	g.Expect(rel.Name).To(Equal("web-" + c2[:10]))
	g.Expect(rel.Spec.Pipeline).To(Equal("web"))
	g.Expect(rel.Spec.Commit.Time).NotTo(BeNil())
	g.Expect(rel.Spec.Commit.Time.Time).To(BeTemporally("==", t0.Add(time.Minute)))
	rel.Spec.Commit.Time = nil
	g.Expect(rel.Spec.Commit).To(Equal(promotionv1alpha1.ReleaseCommit{
		SHA: c2, Branch: "main", Subject: "Add a bucket", Message: "Add a bucket\n\nThe bucket holds the logs.",
		Author: "Grace Hopper <grace@example.com>",
	}), "the release of %s", c2)
	owner := metav1.GetControllerOf(&rel)
	g.Expect(owner).NotTo(BeNil())
	g.Expect(owner.Kind).To(Equal("Pipeline"))
	g.Expect(owner.UID).To(Equal(got.UID))
	g.Expect(rels[c1].Spec.Commit.Subject).To(Equal("Initial program"))
	msg := rels[c3].Spec.Commit.Message
	g.Expect(len(msg)).To(BeNumerically("<=", maxMessageLength))
	g.Expect(long).To(HavePrefix(msg), "the message is cut, not changed")

	// Each release was announced once.
	g.Eventually(func(g Gomega) {
		g.Expect(eventsOf(g, ns, "web")[promotionv1alpha1.EventReleaseDiscovered]).To(HaveLen(3))
	}, 10*time.Second).Should(Succeed())

	// A new commit is the next release.
	c4 := commitAt(repo, 3, "Fourth", map[string]string{"main.yaml": "c"})
	waitPipeline(t, ns, "web", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		released(g, p, c4, c3, c2, c1)
	})
	g.Consistently(func(g Gomega) {
		g.Expect(releasesOf(g, ns, "web")).To(HaveLen(4))
		g.Expect(eventsOf(g, ns, "web")[promotionv1alpha1.EventReleaseDiscovered]).To(HaveLen(4))
	}, 2*pollInterval, 500*time.Millisecond).Should(Succeed(), "a release is recorded and announced once")
}

func TestIncludePaths(t *testing.T) {
	t.Parallel()
	ns, _, repo, _ := newRepo(t, 0)
	infra1 := commitAt(repo, 0, "infra", map[string]string{"infra/a.yaml": "1"})
	commitAt(repo, 1, "docs only", map[string]string{"docs/guide.md": "1"})
	commitAt(repo, 2, "infra readme only", map[string]string{"infra/README.md": "1"})
	infra2 := commitAt(repo, 3, "infra and docs", map[string]string{"infra/b.yaml": "1", "docs/guide.md": "2"})
	create(t, pipelineOn(ns, "infra", repo.URL, func(g *promotionv1alpha1.GitSubscription) {
		g.IncludePaths = []string{"infra/"}
		g.ExcludePaths = []string{"*.md"}
	}))
	waitPipeline(t, ns, "infra", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		released(g, p, infra2, infra1)
	})
	// A commit the filters refuse is no release, now or later.
	commitAt(repo, 4, "docs again", map[string]string{"docs/guide.md": "3"})
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(releasesOf(g, ns, "infra")).To(HaveLen(2))
	}, 3*pollInterval, 500*time.Millisecond).Should(Succeed())
	infra3 := commitAt(repo, 5, "infra again", map[string]string{"infra/c.yaml": "1"})
	waitPipeline(t, ns, "infra", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		released(g, p, infra3, infra2, infra1)
	})
}

func TestSemVer(t *testing.T) {
	t.Parallel()
	ns, _, repo, shas := newRepo(t, 3)
	a, b, c := shas[0], shas[1], shas[2]
	repo.Tag("v1.0.0", a)
	repo.AnnotatedTag("v1.1.0", b, "release 1.1")
	repo.Tag("v2.0.0", c)        // outside the constraint
	repo.Tag("v1.2.0-rc.1", c)   // a pre-release: outside too
	repo.Tag("not-a-version", c) // ignored
	create(t, pipelineOn(ns, "tags", repo.URL, func(g *promotionv1alpha1.GitSubscription) {
		g.Branch = ""
		g.CommitSelectionStrategy = promotionv1alpha1.SemVer
		g.SemverConstraint = "^1.0.0"
	}))
	waitPipeline(t, ns, "tags", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		rels := released(g, p, b, a)
		g.Expect(rels[a].Spec.Commit.Tag).To(Equal("v1.0.0"))
		g.Expect(rels[b].Spec.Commit.Tag).To(Equal("v1.1.0"))
		g.Expect(rels[b].Spec.Commit.Subject).To(Equal("B"))
		g.Expect(rels[b].Spec.Commit.Branch).To(BeEmpty())
	})

	// A newer version is a release, with the newest of the tags its commit
	// has; an older one is not.
	d := commitAt(repo, 3, "D", map[string]string{"f": "d"})
	repo.Tag("v1.3.0", d)
	repo.Tag("v1.3.1", d)
	repo.Tag("v0.9.0", d)
	e := repo.CommitWith("old", map[string]string{"f": "e"}, gitserver.CommitOptions{Time: t0.Add(time.Hour)})
	repo.Tag("v1.0.1", e)
	waitPipeline(t, ns, "tags", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		rels := released(g, p, d, b, a)
		g.Expect(rels[d].Spec.Commit.Tag).To(Equal("v1.3.1"))
	})
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(releasesOf(g, ns, "tags")).To(HaveLen(3), "v1.0.1 is older than the newest release")
	}, 2*pollInterval, 500*time.Millisecond).Should(Succeed())

	// A constraint that does not parse stalls, naming the field.
	var p promotionv1alpha1.Pipeline
	g := NewWithT(t)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tags"}, &p)).To(Succeed())
	// A patch, not an update: the controller writes the status meanwhile.
	base := p.DeepCopy()
	p.Spec.Git.SemverConstraint = "^^1"
	g.Expect(env.Client.Patch(context.Background(), &p, client.MergeFrom(base))).To(Succeed())
	waitPipeline(t, ns, "tags", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		stalled := apimeta.FindStatusCondition(p.Status.Conditions, sreconcile.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(sreconcile.StalledSpecInvalidReason))
		g.Expect(stalled.Message).To(HavePrefix("spec.git.semverConstraint: "))
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	})
}

func TestNewestTagAndLexical(t *testing.T) {
	t.Parallel()
	ns, _, repo, shas := newRepo(t, 3)
	a, b, c := shas[0], shas[1], shas[2]
	repo.Tag("zeta", a)
	repo.Tag("beta", b)
	repo.Tag("alpha", c)
	create(t, pipelineOn(ns, "newest", repo.URL, func(g *promotionv1alpha1.GitSubscription) {
		g.CommitSelectionStrategy, g.Branch, g.DiscoveryLimit = promotionv1alpha1.NewestTag, "", 2
	}))
	create(t, pipelineOn(ns, "lexical", repo.URL, func(g *promotionv1alpha1.GitSubscription) {
		g.CommitSelectionStrategy, g.Branch, g.DiscoveryLimit = promotionv1alpha1.Lexical, "", 2
	}))
	waitPipeline(t, ns, "newest", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		released(g, p, c, b)
	})
	waitPipeline(t, ns, "lexical", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		rels := released(g, p, a, b)
		g.Expect(rels[a].Spec.Commit.Tag).To(Equal("zeta"))
		g.Expect(rels[b].Spec.Commit.Tag).To(Equal("beta"))
	})
}

func TestRetentionSparesReleasesInUse(t *testing.T) {
	t.Parallel()
	ns, _, repo, shas := newRepo(t, 6)
	create(t, pipelineOn(ns, "web", repo.URL, nil))
	waitPipeline(t, ns, "web", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		g.Expect(releasesOf(g, ns, "web")).To(HaveLen(6))
	})
	ctx := context.Background()
	g := NewWithT(t)
	since := metav1.NewTime(time.Now().Truncate(time.Second))
	setStatus := func(sha string, status promotionv1alpha1.ReleaseStatus) {
		var rel promotionv1alpha1.Release
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ReleaseName("web", sha)}, &rel)).To(Succeed())
		rel.Status = status
		g.Expect(env.Client.Status().Update(ctx, &rel)).To(Succeed())
	}
	// The oldest runs in dev; the third is prod's rollback target (verified
	// there before the fourth, which prod runs now); the second is what a
	// pending Promotion asks for.
	in := map[string]promotionv1alpha1.ReleaseInStage{"dev": {Since: since}}
	setStatus(shas[0], promotionv1alpha1.ReleaseStatus{CurrentlyIn: in})
	setStatus(shas[2], promotionv1alpha1.ReleaseStatus{VerifiedIn: map[string]promotionv1alpha1.ReleaseInStage{"prod": {Since: since}}})
	setStatus(shas[3], promotionv1alpha1.ReleaseStatus{
		CurrentlyIn: map[string]promotionv1alpha1.ReleaseInStage{"prod": {Since: since}},
		VerifiedIn:  map[string]promotionv1alpha1.ReleaseInStage{"prod": {Since: metav1.NewTime(since.Add(time.Second))}},
	})
	create(t, &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promote-second"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "qa", Release: ReleaseName("web", shas[1])},
	})

	var p promotionv1alpha1.Pipeline
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &p)).To(Succeed())
	base := p.DeepCopy()
	p.Spec.ReleaseRetention = 1
	g.Expect(env.Client.Patch(ctx, &p, client.MergeFrom(base))).To(Succeed())
	waitPipeline(t, ns, "web", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		rels := releasesOf(g, ns, "web")
		g.Expect(rels).NotTo(HaveKey(shas[4]), "beyond the retention and unused")
		g.Expect(rels).To(HaveLen(5))
		for _, i := range []int{0, 1, 2, 3, 5} {
			g.Expect(rels).To(HaveKey(shas[i]), "release %d", i)
		}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(eventsOf(g, ns, "web")[promotionv1alpha1.EventReleasesPruned]).To(ContainElement(ContainSubstring(ReleaseName("web", shas[4]))))
		// Every deletion of a record leaves an event of its own.
		g.Expect(eventsOf(g, ns, "web")[sreconcile.EventRecordDeleted]).To(ContainElement(HavePrefix("Release " + ReleaseName("web", shas[4]) + " (commit ")))
	}, 10*time.Second).Should(Succeed())

	// Once dev moves on, its old release goes too.
	setStatus(shas[0], promotionv1alpha1.ReleaseStatus{})
	waitPipeline(t, ns, "web", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		g.Expect(releasesOf(g, ns, "web")).NotTo(HaveKey(shas[0]))
		g.Expect(releasesOf(g, ns, "web")).To(HaveLen(4))
	})
}

func TestSourceErrorsStall(t *testing.T) {
	t.Parallel()
	ns, srv, repo, _ := newRepo(t, 1)

	stalled := func(name, prefix string) {
		t.Helper()
		waitPipeline(t, ns, name, 40*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
			c := apimeta.FindStatusCondition(p.Status.Conditions, sreconcile.StalledCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(HavePrefix(prefix))
			g.Expect(apimeta.IsStatusConditionTrue(p.Status.Conditions, sreconcile.ReadyCondition)).To(BeFalse())
		})
	}
	create(t, pipelineOn(ns, "bad-url", "file:///etc/app.git", nil))
	create(t, pipelineOn(ns, "no-repo", srv.RepoURL("missing"), nil))
	create(t, pipelineOn(ns, "no-branch", repo.URL, func(g *promotionv1alpha1.GitSubscription) { g.Branch = "nope" }))
	stalled("bad-url", "spec.git.repoURL: InvalidSpec: ")
	stalled("no-repo", "spec.git.repoURL: NotFound: ")
	stalled("no-branch", `spec.git.branch: NotFound: branch "nope" not found`)

	// Credentials: first the Secret is missing, then wrong, then right.
	srv.SetBasicAuth("deployer", "right-password-7c1f")
	create(t, pipelineOn(ns, "private", repo.URL, func(g *promotionv1alpha1.GitSubscription) {
		g.SecretRef = &corev1.LocalObjectReference{Name: "git-creds"}
	}))
	waitPipeline(t, ns, "private", 20*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		c := apimeta.FindStatusCondition(p.Status.Conditions, sreconcile.ReconcilingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReferenceNotFoundReason))
		g.Expect(c.Message).To(Equal(`spec.git.secretRef: Secret "git-creds" not found`))
	})
	stalled("private", `unresolved for more than 3s: spec.git.secretRef: Secret "git-creds" not found`)

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-creds"},
		StringData: map[string]string{"username": "deployer", "password": "wrong-password-93ad"},
	}
	create(t, secret)
	stalled("private", "spec.git.secretRef: AuthFailed: ")
	secret.Data["password"] = []byte("right-password-7c1f")
	NewWithT(t).Expect(env.Client.Update(context.Background(), secret)).To(Succeed())
	waitPipeline(t, ns, "private", 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
		ready(g, p)
		g.Expect(releasesOf(g, ns, "private")).To(HaveLen(1))
	})

	// No secret value is in any status or event.
	g := NewWithT(t)
	var pipelines promotionv1alpha1.PipelineList
	g.Expect(env.Client.List(context.Background(), &pipelines, client.InNamespace(ns))).To(Succeed())
	for _, p := range pipelines.Items {
		for _, c := range p.Status.Conditions {
			for _, s := range neverLogged {
				g.Expect(c.Message).NotTo(ContainSubstring(s))
			}
		}
	}
	for _, notes := range eventsOf(g, ns, "private") {
		for _, note := range notes {
			for _, s := range neverLogged {
				g.Expect(note).NotTo(ContainSubstring(s))
			}
		}
	}
}

func TestPipelinesShareOnePollPerInterval(t *testing.T) {
	t.Parallel()
	ns, srv, repo, shas := newRepo(t, 1)
	repo.Tag("v1.0.0", shas[0])
	create(t, pipelineOn(ns, "branch", repo.URL, nil))
	create(t, pipelineOn(ns, "tags", repo.URL, func(g *promotionv1alpha1.GitSubscription) {
		g.CommitSelectionStrategy, g.Branch = promotionv1alpha1.SemVer, ""
	}))
	for _, name := range []string{"branch", "tags"} {
		waitPipeline(t, ns, name, 30*time.Second, func(g Gomega, p *promotionv1alpha1.Pipeline) {
			ready(g, p)
			g.Expect(releasesOf(g, ns, name)).To(HaveLen(1))
		})
	}
	before := srv.Requests("app")
	const intervals = 4
	time.Sleep(intervals * pollInterval)
	after := srv.Requests("app")
	lsRemotes := after.LsRemotes() - before.LsRemotes()
	t.Logf("%d ls-remotes and %d fetches in %d intervals", lsRemotes, after.Fetches-before.Fetches, intervals)
	// Two Pipelines polling on their own would list the refs twice per
	// interval; sharing, they list them at most once (one more for where
	// the window cuts an interval).
	if lsRemotes < 1 || lsRemotes > intervals+1 {
		t.Errorf("%d ls-remotes in %d intervals, want one per interval", lsRemotes, intervals)
	}
	if after.Fetches != before.Fetches {
		t.Errorf("%d fetches while nothing changed, want none", after.Fetches-before.Fetches)
	}
}
