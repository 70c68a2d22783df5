package promotion_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// opTimeout bounds a wait that includes Pulumi operations; it is a guard
// against a hang, not a measurement.
const opTimeout = 3 * time.Minute

// project is the project of every Stack here (testenv.FileProject): it
// writes version to the file its Stack's config key web:path names.
func project(version string) string { return testenv.FileProject(version) }

// programRepo is a git repository holding the project; commit adds a
// commit whose project writes version, and returns its SHA.
type programRepo struct{ *gitserver.Repo }

func newProgramRepo(t *testing.T) programRepo {
	return programRepo{gitserver.New(t).CreateRepo("web")}
}

func (r programRepo) commit(version string) string {
	return r.Commit("main", map[string]string{"Pulumi.yaml": project(version)})
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	return env.NewNamespace(t, "promotion-")
}

// create creates obj as an administrator, failing the test on error. A
// Stage is created as a governor does it: its Stacks are annotated to
// consent to it.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	st, isStage := obj.(*promotionv1alpha1.Stage)
	if isStage { // before, so that the stage never sees its Stacks without
		if err := testenv.AuthorizeStacks(context.Background(), env.Client, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// consent makes each Stack among objs consent to the first deploying
// stage among objs that lists it, as a governor would before creating
// them together.
func consent(objs []client.Object) {
	stacks := map[string]*pulumiv1.Stack{}
	for _, obj := range objs {
		if s, ok := obj.(*pulumiv1.Stack); ok {
			stacks[s.Name] = s
		}
	}
	for _, previewOnly := range []bool{false, true} {
		for _, obj := range objs {
			st, ok := obj.(*promotionv1alpha1.Stage)
			if !ok || st.Spec.PreviewOnly != previewOnly {
				continue
			}
			for _, b := range st.Spec.Stacks {
				s := stacks[b.Name]
				switch {
				case s == nil:
				case !previewOnly && s.Annotations[promotionv1alpha1.AuthorizedStageAnnotation] == "":
					metav1.SetMetaDataAnnotation(&s.ObjectMeta, promotionv1alpha1.AuthorizedStageAnnotation, st.Name)
				case previewOnly && s.Annotations[promotionv1alpha1.AuthorizedStageAnnotation] != "":
					// A preview runs the Stack's program with its
					// credentials: its governor lets the stage.
					stages := append(change.PreviewStages(s.Annotations), st.Name)
					metav1.SetMetaDataAnnotation(&s.ObjectMeta, promotionv1alpha1.PreviewStagesAnnotation, strings.Join(stages, ","))
				}
			}
		}
	}
}

// gitStack is a Stack named name deploying repo at commit to its own
// file:// backend in a new directory, writing the file it returns.
func gitStack(t *testing.T, ns, name, repoURL, commit string) (*pulumiv1.Stack, string) {
	t.Helper()
	dir := testenv.LiveDir(t)
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "page.txt")
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   "file://" + state,
			Config:    map[string]apiextensionsv1.JSON{"web:path": {Raw: []byte(fmt.Sprintf("%q", target))}},
			GitSource: &shared.GitSource{ProjectRepo: repoURL, Commit: commit},
		},
	}, target
}

// pipeline is a Pipeline named web whose own discovery finds nothing (its
// branch does not exist): the tests make Releases by hand, as the
// Pipeline would.
func pipeline(ns, repoURL string) *promotionv1alpha1.Pipeline {
	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repoURL, Branch: "releases-are-made-by-the-test"}
	return p
}

// release is the Release name of pipeline web for the commit sha,
// committed at commitTime, labelled as the Pipeline labels them.
func release(ns, name, sha string, commitTime time.Time) *promotionv1alpha1.Release {
	t := metav1.NewTime(commitTime)
	return &promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{promotionv1alpha1.PipelineLabel: "web"}},
		Spec: promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{
			SHA: sha, Branch: "main", Subject: "release " + name, Time: &t,
		}},
	}
}

// stage is a Stage of pipeline web deploying stacks, adjusted by mutate.
func stage(ns, name string, stacks []string, mutate func(*promotionv1alpha1.StageSpec)) *promotionv1alpha1.Stage {
	st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	st.Spec.Pipeline = "web"
	st.Spec.Sources.Direct = true
	for _, s := range stacks {
		st.Spec.Stacks = append(st.Spec.Stacks, promotionv1alpha1.StackBinding{Name: s})
	}
	if mutate != nil {
		mutate(&st.Spec)
	}
	return st
}

// autoPromote turns auto-promotion on.
func autoPromote(spec *promotionv1alpha1.StageSpec) {
	spec.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true}
}

// testUser is the user name the tests' client is authenticated as, which
// the admission policy requires in spec.requestedBy.
var testUser string

// askFor asks, as the tests' user, for release in stage.
func askFor(ns, name, stageName, releaseName string, rollback bool) *promotionv1alpha1.Promotion {
	return &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: promotionv1alpha1.PromotionSpec{
			Stage: stageName, Release: releaseName, Rollback: rollback, RequestedBy: testUser, Reason: "a test asks",
		},
	}
}

// get reads obj (its namespace and name set) afresh.
func get(g Gomega, obj client.Object) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

// waitFor polls obj until check passes, describing it on failure.
func waitFor[T client.Object](t *testing.T, obj T, timeout time.Duration, check func(g Gomega, obj T)) T {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, obj)
		check(g, obj)
	}, timeout, 250*time.Millisecond).Should(Succeed(), func() string { return describe(obj) })
	return obj
}

// waitFinished waits for the Promotion ns/name to finish, and returns it.
func waitFinished(t *testing.T, ns, name string, timeout time.Duration) *promotionv1alpha1.Promotion {
	t.Helper()
	return waitFor(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, timeout,
		func(g Gomega, p *promotionv1alpha1.Promotion) { g.Expect(p.Status.Phase.IsFinished()).To(BeTrue()) })
}

// promotionsOf lists the Promotions of stage, oldest first.
func promotionsOf(g Gomega, ns, stageName string) []promotionv1alpha1.Promotion {
	var list promotionv1alpha1.PromotionList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []promotionv1alpha1.Promotion
	for _, p := range list.Items {
		if p.Spec.Stage == stageName {
			out = append(out, p)
		}
	}
	return out
}

// waitPromotionOf waits for the one promotion of stage that promotes
// releaseName to finish, and returns it.
func waitPromotionOf(t *testing.T, ns, stageName, releaseName string) *promotionv1alpha1.Promotion {
	t.Helper()
	var found *promotionv1alpha1.Promotion
	NewWithT(t).Eventually(func(g Gomega) {
		found = nil
		for _, p := range promotionsOf(g, ns, stageName) {
			if p.Spec.Release == releaseName {
				g.Expect(found).To(BeNil(), "two promotions of %s into %s", releaseName, stageName)
				found = &p
			}
		}
		g.Expect(found).NotTo(BeNil(), "no promotion of %s into %s yet", releaseName, stageName)
		g.Expect(found.Status.Phase.IsFinished()).To(BeTrue(), "%s is %s: %s", found.Name, found.Status.Phase, found.Status.Message)
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return describeNamespace(ns) })
	return found
}

// eventReasons returns the reasons of the events regarding the object of
// kind named name.
func eventReasons(g Gomega, ns, kind, name string) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == kind {
			out = append(out, e.Reason)
		}
	}
	return out
}

// readFile returns a deployed file's content.
func readFile(g Gomega, path string) string {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// describe renders an object's status for failure messages.
func describe(obj client.Object) string {
	switch o := any(obj).(type) {
	case *promotionv1alpha1.Promotion:
		return fmt.Sprintf("promotion %s: %s %q %+v", o.Name, o.Status.Phase, o.Status.Message, o.Status.Stacks)
	case *promotionv1alpha1.Stage:
		return describeStage(o)
	case *pulumiv1.Stack:
		out := fmt.Sprintf("stack %s generation %d observed %d commit %s\n", o.Name, o.Generation, o.Status.ObservedGeneration, o.Spec.Commit)
		for _, c := range o.Status.Conditions {
			out += fmt.Sprintf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		return out
	}
	return fmt.Sprintf("%T %s", obj, obj.GetName())
}

func describeStage(st *promotionv1alpha1.Stage) string {
	out := fmt.Sprintf("stage %s generation %d observed %d waitingFor %q current %+v health %+v\n",
		st.Name, st.Generation, st.Status.ObservedGeneration, st.Status.WaitingFor, st.Status.CurrentRelease, st.Status.Health)
	for _, c := range st.Status.Conditions {
		out += fmt.Sprintf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return out
}

// describeNamespace renders the stages, promotions and releases of ns.
func describeNamespace(ns string) string {
	ctx := context.Background()
	var b strings.Builder
	var stages promotionv1alpha1.StageList
	if env.Client.List(ctx, &stages, client.InNamespace(ns)) == nil {
		for i := range stages.Items {
			b.WriteString(describeStage(&stages.Items[i]))
		}
	}
	var promotions promotionv1alpha1.PromotionList
	if env.Client.List(ctx, &promotions, client.InNamespace(ns)) == nil {
		for i := range promotions.Items {
			b.WriteString(describe(&promotions.Items[i]) + "\n")
		}
	}
	var releases promotionv1alpha1.ReleaseList
	if env.Client.List(ctx, &releases, client.InNamespace(ns)) == nil {
		for _, r := range releases.Items {
			fmt.Fprintf(&b, "release %s current %v verified %v failed %v\n", r.Name, r.Status.CurrentlyIn, r.Status.VerifiedIn, r.Status.FailedIn)
		}
	}
	var stacks pulumiv1.StackList
	if env.Client.List(ctx, &stacks, client.InNamespace(ns)) == nil {
		for i := range stacks.Items {
			b.WriteString(describe(&stacks.Items[i]))
		}
	}
	return b.String()
}

// watchMade watches the Workspaces of namespace ns from now on and returns
// a function that calls report for each name that was made more than once
// (seen with more than one UID), with how many times.
func watchMade(t *testing.T, ns string) func(report func(name string, uids int)) {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &autov1alpha1.WorkspaceList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	uids := map[string]map[types.UID]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			ws, ok := ev.Object.(*autov1alpha1.Workspace)
			if !ok {
				continue
			}
			mu.Lock()
			if uids[ws.Name] == nil {
				uids[ws.Name] = map[types.UID]bool{}
			}
			uids[ws.Name][ws.UID] = true
			mu.Unlock()
		}
	}()
	stop := func() {
		cancel()
		w.Stop()
		<-done
	}
	t.Cleanup(stop)
	return func(report func(string, int)) {
		mu.Lock()
		defer mu.Unlock()
		for name, set := range uids {
			if len(set) > 1 {
				report(name, len(set))
			}
		}
	}
}

// previewsOf are the previews promotion p recorded (its StackPromotions),
// read from the API server, in the order of its rollout or by name.
func previewsOf(g Gomega, p *promotionv1alpha1.Promotion) []promotionv1alpha1.StackPreview {
	recs, err := change.StackRecords(context.Background(), env.Client, p)
	g.Expect(err).NotTo(HaveOccurred())
	return change.Previews(p, recs)
}
