package promotion_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// intervene asks, as the tests' user, for action on the promotion.
func intervene(t *testing.T, ns, name, promotion, stageName string, action promotionv1alpha1.InterventionAction) {
	t.Helper()
	create(t, &promotionv1alpha1.Intervention{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: promotionv1alpha1.InterventionSpec{
			Promotion: promotion, Stage: stageName, Action: action, User: testUser, Reason: "a test intervenes",
		},
	})
}

// deployedFleet creates a Stack of the repository at commit for each
// name, waits until each is deployed, and returns the files they write,
// by name.
func deployedFleet(t *testing.T, ns, repoURL, commit string, names ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, name := range names {
		stack, file := gitStack(t, ns, name, repoURL, commit)
		create(t, stack)
		files[name] = file
	}
	for _, name := range names {
		deployed(t, ns, name, commit)
	}
	return files
}

// commitOf is the Stack's spec.commit.
func commitOf(g Gomega, ns, name string) string {
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	get(g, s)
	return s.Spec.Commit
}

// TestRolloutInWaves: a stage of four Stacks rolls a release out in three
// waves (1, then up to 75 %, then the rest), with a failure budget of 0.
//
//  1. A Stack of wave 2 fails (its file's path is a directory, an outside
//     fault): the budget is spent and the rollout halts, Running with the
//     reason Halted. Wave 3's Stacks are untouched: neither pinned nor
//     deployed.
//  2. The fault is mended, and the Stack's own retry deploys the release;
//     the rollout stays halted until a person resumes it (an
//     Intervention, recorded with its user), and then it finishes.
//  3. The next release halts the same way; an abort ends the promotion
//     once nothing updates, Aborted, saying which release each Stack
//     runs; wave 3 is Skipped and still on the release before.
//  4. A rollback of that half-done fleet brings every Stack back to the
//     release the stage ran.
func TestRolloutInWaves(t *testing.T) {
	g := NewWithT(t)

	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1, c2, c3 := repo.commit("v1"), repo.commit("v2"), repo.commit("v3")
	names := []string{"a", "b", "c", "d"}
	files := map[string]string{}
	for _, name := range names {
		stack, file := gitStack(t, ns, name, repo.URL, c1)
		stack.Spec.RetryMaxBackoffDurationSeconds = 1
		create(t, stack)
		files[name] = file
	}
	for _, name := range names {
		deployed(t, ns, name, c1)
	}
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now().Add(-time.Minute)))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "fleet", names, func(s *promotionv1alpha1.StageSpec) {
		s.Rollout = &promotionv1alpha1.Rollout{
			Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("75%")},
		}
	}))

	// An outside fault breaks c, of wave 2: writing its file fails.
	breakFile := func(name string) {
		g.Expect(os.Remove(files[name])).To(Succeed())
		g.Expect(os.Mkdir(files[name], 0o755)).To(Succeed())
	}
	// Mended, the file is back as it was before the fault (the test
	// provider does not refresh: it takes its state for the truth).
	mend := func(name, content string) {
		g.Expect(os.Remove(files[name])).To(Succeed())
		g.Expect(os.WriteFile(files[name], []byte(content), 0o644)).To(Succeed())
	}
	breakFile("c")

	made := watchMade(t, ns)
	create(t, askFor(ns, "to-r2", "fleet", "r2", false))
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-r2"}}
	waitFor(t, p, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionRunning))
		g.Expect(p.Status.Reason).To(Equal(promotionv1alpha1.PromotionReasonHalted))
		g.Expect(p.Status.Rollout).NotTo(BeNil())
		g.Expect(p.Status.Rollout.Counts).To(Equal(promotionv1alpha1.RolloutCounts{Succeeded: 2, Failed: 1, Pending: 1}))
	})
	// Each Stack's preview Workspace was made once: a promotion that
	// lost its record of one (or read an old copy of itself) deleted and
	// made it again, dozens of times, each with an agent.
	made(func(name string, uids int) {
		t.Errorf("the preview Workspace %s was made %d times, want once", name, uids)
	})
	g.Expect(p.Status.Rollout.Waves).To(Equal(int32(3)))
	g.Expect(p.Status.Rollout.Wave).To(Equal(int32(2)))
	g.Expect(p.Status.Rollout.Halted).To(ContainSubstring("the failure budget is spent: 1 Stack failed, the budget is 0 (c)"))
	g.Expect(p.Status.Message).To(ContainSubstring("rollout halted in wave 2 of 3"))
	g.Expect(p.Status.Stacks).To(HaveLen(4))
	for _, ps := range p.Status.Stacks {
		want := map[string]int32{"a": 1, "b": 2, "c": 2, "d": 3}[ps.Name]
		g.Expect(ps.Wave).To(Equal(want), "the wave of Stack %s", ps.Name)
	}
	for _, name := range []string{"d"} {
		g.Expect(commitOf(g, ns, name)).To(Equal(c1), "wave 3's Stack %s was pinned", name)
		g.Expect(readFile(g, files[name])).To(Equal("v1"), "wave 3's Stack %s was deployed", name)
	}
	g.Expect(readFile(g, files["a"])).To(Equal("v2"))

	// Mended, c deploys the release by its own retry; the rollout stays
	// halted until someone resumes it.
	mend("c", "v1")
	waitFor(t, p, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Rollout.Counts).To(Equal(promotionv1alpha1.RolloutCounts{Succeeded: 3, Pending: 1}))
	})
	g.Expect(p.Status.Reason).To(Equal(promotionv1alpha1.PromotionReasonHalted))
	g.Expect(commitOf(g, ns, "d")).To(Equal(c1), "a halted rollout went on by itself")
	intervene(t, ns, "resume-r2", "to-r2", "fleet", promotionv1alpha1.Resume)
	done := waitFinished(t, ns, "to-r2", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(done))
	g.Expect(done.Status.Rollout.Counts).To(Equal(promotionv1alpha1.RolloutCounts{Succeeded: 4}))
	g.Expect(done.Status.Rollout.Halts).To(ConsistOf(And(
		HaveField("By", ""), HaveField("Reason", ContainSubstring("the failure budget is spent")))), "the halt is recorded, by nobody")
	g.Expect(done.Status.Rollout.Interventions).To(ConsistOf(And(
		HaveField("Intervention", "resume-r2"), HaveField("Action", promotionv1alpha1.Resume), HaveField("User", testUser))))
	for _, name := range names {
		g.Expect(readFile(g, files[name])).To(Equal("v2"), "Stack %s", name)
	}
	waitFor(t, &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}, opTimeout,
		func(g Gomega, st *promotionv1alpha1.Stage) {
			g.Expect(st.Status.CurrentRelease).NotTo(BeNil())
			g.Expect(st.Status.CurrentRelease.Name).To(Equal("r2"))
		})

	// r3 halts the same way; an abort ends it with every Stack on a
	// release it names.
	create(t, release(ns, "r3", c3, time.Now()))
	breakFile("c")
	create(t, askFor(ns, "to-r3", "fleet", "r3", false))
	waitFor(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-r3"}}, opTimeout,
		func(g Gomega, p *promotionv1alpha1.Promotion) {
			g.Expect(p.Status.Reason).To(Equal(promotionv1alpha1.PromotionReasonHalted))
		})
	intervene(t, ns, "abort-r3", "to-r3", "fleet", promotionv1alpha1.Abort)
	aborted := waitFinished(t, ns, "to-r3", opTimeout)
	g.Expect(aborted.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted), describe(aborted))
	g.Expect(aborted.Status.Message).To(And(
		ContainSubstring("aborted by "+testUser+": a test intervenes"),
		ContainSubstring("2 Stacks run release r3"),
		ContainSubstring("1 Stack runs release r2"),
		ContainSubstring("1 Stack failed to update"),
	))
	g.Expect(aborted.Status.Rollout.Counts).To(Equal(promotionv1alpha1.RolloutCounts{Succeeded: 2, Failed: 1, Skipped: 1}))
	for name, want := range map[string]string{"a": "v3", "b": "v3", "d": "v2"} {
		g.Expect(readFile(g, files[name])).To(Equal(want), "Stack %s", name)
	}

	// Rolling the half-done fleet back: every Stack runs r2 again.
	mend("c", "v2")
	create(t, askFor(ns, "back", "fleet", "r2", true))
	back := waitFinished(t, ns, "back", opTimeout)
	g.Expect(back.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(back))
	for _, name := range names {
		g.Expect(commitOf(g, ns, name)).To(Equal(c2), "Stack %s", name)
		g.Expect(readFile(g, files[name])).To(Equal("v2"), "Stack %s", name)
	}

}

// TestWaveVerificationFails: a stage of two Stacks, one a wave, checks
// each wave over HTTP (verifyEachWave), and the endpoint calls the
// release unhealthy.
//
//  1. Wave 1 deploys; its check fails: the rollout halts, Running with
//     the reason Halted, and wave 2's Stack is neither pinned nor
//     deployed.
//  2. The endpoint is mended and a person resumes: the wave's checks run
//     again (attempt 2) and pass, wave 2 deploys, the stage's checks pass
//     once more as the promotion's verification, and it succeeds.
func TestWaveVerificationFails(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1, c2 := repo.commit("v1"), repo.commit("v2")
	files := deployedFleet(t, ns, repo.URL, c1, "a", "b")
	var healthy atomic.Bool
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]bool{"healthy": healthy.Load()})
	}))
	t.Cleanup(srv.Close)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "fleet", []string{"a", "b"}, func(s *promotionv1alpha1.StageSpec) {
		s.Rollout = &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(1)}, VerifyEachWave: true}
		s.Verification = &promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{{
			Name: "health", SuccessCondition: "result.healthy", HTTP: &promotionv1alpha1.HTTPCheck{URL: srv.URL},
		}}}
	}))

	create(t, askFor(ns, "to-r2", "fleet", "r2", false))
	p := waitFor(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-r2"}}, opTimeout,
		func(g Gomega, p *promotionv1alpha1.Promotion) {
			g.Expect(p.Status.Reason).To(Equal(promotionv1alpha1.PromotionReasonHalted), describe(p))
		})
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionRunning))
	g.Expect(p.Status.Rollout.Halted).To(HavePrefix("the checks of wave 1 failed: check health failed"))
	g.Expect(p.Status.Rollout.Verification).To(HaveValue(SatisfyAll(
		HaveField("Wave", int32(1)), HaveField("Attempt", int32(1)), HaveField("Phase", "Failed"))))
	g.Expect(p.Status.Rollout.Counts).To(Equal(promotionv1alpha1.RolloutCounts{Succeeded: 1, Pending: 1}))
	g.Expect(readFile(g, files["a"])).To(Equal("v2"))
	g.Expect(commitOf(g, ns, "b")).To(Equal(c1), "wave 2 was pinned after wave 1's checks failed")
	g.Expect(readFile(g, files["b"])).To(Equal("v1"), "wave 2 was deployed after wave 1's checks failed")
	g.Expect(eventReasons(g, ns, "Promotion", "to-r2")).To(ContainElements(promotionv1alpha1.EventVerificationFailed, promotionv1alpha1.EventRolloutHalted))

	healthy.Store(true)
	intervene(t, ns, "resume", "to-r2", "fleet", promotionv1alpha1.Resume)
	done := waitFinished(t, ns, "to-r2", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(done))
	g.Expect(done.Status.Rollout.Verification).To(HaveValue(SatisfyAll(
		HaveField("Wave", int32(1)), HaveField("Attempt", int32(2)), HaveField("Phase", "Succeeded"))))
	g.Expect(done.Status.Verification).To(HaveValue(HaveField("Phase", "Succeeded")), "the last wave is verified as the promotion")
	g.Expect(done.Status.Rollout.Halts).To(ConsistOf(HaveField("Reason", HavePrefix("the checks of wave 1 failed"))))
	g.Expect(calls.Load()).To(BeNumerically("==", 3), "wave 1 twice, then the promotion's verification once")
	g.Expect(readFile(g, files["b"])).To(Equal("v2"))
}
