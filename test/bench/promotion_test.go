//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/testenv"
)

// PromotionResult is a release's way through a dev → prod pipeline with
// auto-promotion, against the same two updates run by hand.
type PromotionResult struct {
	// Dev is commit pushed (and the Pipeline asked to look) → the dev
	// Stack Ready at the commit, per repetition.
	Dev Spread `json:"dev"`
	// Total is commit pushed → the prod Stack Ready at the commit.
	Total Spread `json:"total"`
	// Bare is the same change by hand: `pulumi up` of a dev stack, then of
	// a prod stack, one after the other.
	Bare Spread `json:"bare"`
	// Added is Total minus Bare.
	Added Spread `json:"added"`
	// Ratio is Total over Bare.
	Ratio Spread `json:"ratio"`

	// Stage is one stage of one Stack crossed: dev's promotion seen
	// Succeeded → the prod Stack Ready at the commit.
	Stage Spread `json:"stage"`
	// StageFloor is the same change of one stack by hand, the way a
	// careful person deploys it: `pulumi preview`, then `pulumi up`.
	StageFloor Spread `json:"stageFloor"`
	// StageRatio is Stage over StageFloor.
	StageRatio Spread `json:"stageRatio"`
	// Phases is where Stage goes, phase by phase, from the client-side
	// times of the Promotion's and its Updates' watch events.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is one step of a stage crossed, over the repetitions.
type Phase struct {
	// Name says from which event to which.
	Name string `json:"name"`
	// Took is how long it took.
	Took Spread `json:"took"`
}

// promotionTimes records, from watch events timed on arrival, when each
// Promotion was first seen, first seen Running and first seen finished.
type promotionTimes struct {
	mu                      sync.Mutex
	seen, running, finished map[string]time.Time
	// last is the newest copy of each Promotion.
	last map[string]*promotionv1alpha1.Promotion
}

func newPromotionTimes() *promotionTimes {
	return &promotionTimes{seen: map[string]time.Time{}, running: map[string]time.Time{}, finished: map[string]time.Time{},
		last: map[string]*promotionv1alpha1.Promotion{}}
}

// on records a Promotion's watch event.
func (r *promotionTimes) on(obj k8sruntime.Object, at time.Time) {
	p, ok := obj.(*promotionv1alpha1.Promotion)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	first := func(m map[string]time.Time) {
		if _, ok := m[p.Name]; !ok {
			m[p.Name] = at
		}
	}
	first(r.seen)
	if p.Status.Phase == promotionv1alpha1.PromotionRunning || p.Status.Phase.IsFinished() {
		first(r.running)
	}
	if p.Status.Phase.IsFinished() {
		first(r.finished)
	}
	r.last[p.Name] = p
}

// of returns the Promotion of release into stage, with its times.
func (r *promotionTimes) of(stage, release string) (p *promotionv1alpha1.Promotion, seen, running, finished time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, q := range r.last {
		if q.Spec.Stage == stage && q.Spec.Release == release && !q.Spec.Rollback {
			return q, r.seen[name], r.running[name], r.finished[name]
		}
	}
	return nil, time.Time{}, time.Time{}, time.Time{}
}

// stagePhases are the steps of the prod stage crossed, from dev's
// promotion Succeeded to the prod Stack Ready.
var stagePhases = []string{
	"dev's promotion Succeeded → prod's Promotion created (auto-promotion)",
	"→ its preview Update created (preview Workspace)",
	"preview Update created → started (agent)",
	"preview Update started → complete (`pulumi preview`)",
	"→ the Promotion Running (records, gates, pin)",
	"→ the Stack's Update created",
	"Stack's Update created → started",
	"Stack's Update started → complete (`pulumi up --plan`)",
	"→ the Stack Ready",
}

// stageTimes are the events of the prod crossing of one release, in the
// order of stagePhases (one more than the phases); ok is false when one
// was not seen.
func stageTimes(h *harness, promos *promotionTimes, ns, devRelease string, prodReady time.Time) ([]time.Time, bool) {
	_, _, _, devDone := promos.of("dev", devRelease)
	p, seen, running, _ := promos.of("prod", devRelease)
	if p == nil || p.Status.Previewed != 1 || len(p.Status.Stacks) != 1 {
		return nil, false
	}
	// The Stack's one preview, of the first round: its Update has the
	// preview's name.
	pvCreated, pvStarted, pvDone, _ := h.rec.updateTimes(ns + "/" + change.PreviewName(p.Name, p.Status.Stacks[0].Name, 1))
	upCreated, upStarted, upDone, _ := h.rec.updateTimes(ns + "/" + p.Status.Stacks[0].Update)
	times := []time.Time{devDone, seen, pvCreated, pvStarted, pvDone, running, upCreated, upStarted, upDone, prodReady}
	for _, t := range times {
		if t.IsZero() {
			return nil, false
		}
	}
	return times, true
}

// promoRepo is the pipeline's repository, apart from the one the other
// figures' Stacks track, so its commits wake nothing else.
const promoRepo = "promo"

// promoProgram is the benchmark program whose message defaults to release:
// each release changes the file the program writes.
func promoProgram(outDir, release string) string {
	return strings.Replace(program(outDir), "default: hello", "default: "+release, 1)
}

// benchPromotion measures repeat releases through a Pipeline "promo":
// Stage dev (fed by the branch) and Stage prod (fed by dev), both promoted
// automatically, each with one Stack pinned to a commit. A repetition
// pushes a commit, asks the Pipeline to look at once (as the dashboard's
// "Check now" and a git webhook do), and times until the prod Stack is
// Ready at it; then the same program change is deployed by hand to two
// stacks of the bare CLI, one after the other.
func benchPromotion(t *testing.T, h *harness, repeat int) *PromotionResult {
	const ns = "promotion"
	h.createNamespace(t, ns)
	ctx := context.Background()
	outDir, bareDir := t.TempDir(), t.TempDir()
	repo := h.git.CreateRepo(promoRepo)
	head := repo.Commit("main", map[string]string{"Pulumi.yaml": promoProgram(outDir, "release-0")})

	pinned := func(name string) *pulumiv1.Stack {
		s := h.stack(ns, name, name, "")
		s.Spec.GitSource = &shared.GitSource{ProjectRepo: repo.URL, Commit: head}
		delete(s.Spec.Config, project+":message")
		// Each Stack consents to its stage: promo-dev to dev, promo-prod to prod.
		s.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: strings.TrimPrefix(name, "promo-")}
		return s
	}
	objs := []client.Object{
		pinned("promo-dev"), pinned("promo-prod"),
		&promotionv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promo"},
			Spec:       promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: repo.URL, Branch: "main"}},
		},
		&promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev"},
			Spec: promotionv1alpha1.StageSpec{
				Pipeline: "promo", Stacks: []promotionv1alpha1.StackBinding{{Name: "promo-dev"}},
				Sources:              promotionv1alpha1.ReleaseSources{Direct: true},
				AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true},
			},
		},
		&promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
			Spec: promotionv1alpha1.StageSpec{
				Pipeline: "promo", Stacks: []promotionv1alpha1.StackBinding{{Name: "promo-prod"}},
				Sources:              promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}},
				AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true},
			},
		},
	}
	for _, obj := range objs {
		if err := h.client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	for _, name := range []string{"promo-dev", "promo-prod"} {
		if _, err := waitCommit(ctx, h, ns, name, head, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// The bare CLI's two stacks, at the same release.
	if err := os.WriteFile(filepath.Join(bareDir, "Pulumi.yaml"), []byte(promoProgram(outDir, "release-0")), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := func(args ...string) (time.Duration, error) { return h.pulumiIn(bareDir, args...) }
	for _, s := range []string{"promo-bare-dev", "promo-bare-prod"} {
		if _, err := bare("stack", "init", "--no-select", "--stack", s); err != nil {
			t.Fatal(err)
		}
		if _, err := bare("up", "--stack", s, "--yes", "--skip-preview"); err != nil {
			t.Fatal(err)
		}
	}

	promos := newPromotionTimes()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watchLoop(watchCtx, h.client, &promotionv1alpha1.PromotionList{}, promos.on)

	var devs, totals, bares, added, ratios, stages, floors, stageRatios []float64
	phases := make([][]float64, len(stagePhases))
	for i := 1; i <= repeat; i++ {
		release := fmt.Sprintf("release-%d", i)
		sha := repo.Commit("main", map[string]string{"Pulumi.yaml": promoProgram(outDir, release)})
		start := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, shared.ReconcileRequestAnnotation, start.UTC().Format(time.RFC3339Nano))
		p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promo"}}
		if err := h.client.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		devAt, err := waitCommit(ctx, h, ns, "promo-dev", sha, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		prodAt, err := waitCommit(ctx, h, ns, "promo-prod", sha, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bareDir, "Pulumi.yaml"), []byte(promoProgram(outDir, release)), 0o644); err != nil {
			t.Fatal(err)
		}
		var b time.Duration
		for _, s := range []string{"promo-bare-dev", "promo-bare-prod"} {
			d, err := bare("up", "--stack", s, "--yes", "--skip-preview")
			if err != nil {
				t.Fatal(err)
			}
			b += d
		}
		// One stage by hand: a preview, then the up, of the same change
		// (the program back at the release before, so that both change
		// something: a stack of its own, so that the others stay put).
		floor, err := stageByHand(bare, bareDir, outDir, release)
		if err != nil {
			t.Fatal(err)
		}
		// The release's name is the Pipeline's; find it by the promotion of
		// the commit the prod Stack runs.
		if rel := releaseOf(ctx, h, ns, sha); rel != "" {
			if times, ok := stageTimes(h, promos, ns, rel, prodAt); ok {
				stage := prodAt.Sub(times[0])
				stages = append(stages, stage.Seconds())
				floors = append(floors, floor.Seconds())
				stageRatios = append(stageRatios, stage.Seconds()/floor.Seconds())
				for j := range stagePhases {
					phases[j] = append(phases[j], times[j+1].Sub(times[j]).Seconds())
				}
			} else {
				t.Logf("release %d: the prod crossing's events were not all seen", i)
			}
		}
		total := prodAt.Sub(start)
		devs = append(devs, devAt.Sub(start).Seconds())
		totals = append(totals, total.Seconds())
		bares = append(bares, b.Seconds())
		added = append(added, (total - b).Seconds())
		ratios = append(ratios, total.Seconds()/b.Seconds())
		t.Logf("release %d: dev Ready after %.2fs, prod after %.2fs; by hand %.2fs", i, devAt.Sub(start).Seconds(), total.Seconds(), b.Seconds())
	}
	res := &PromotionResult{Dev: spreadOf(devs), Total: spreadOf(totals), Bare: spreadOf(bares), Added: spreadOf(added), Ratio: spreadOf(ratios),
		Stage: spreadOf(stages), StageFloor: spreadOf(floors), StageRatio: spreadOf(stageRatios)}
	for j, name := range stagePhases {
		res.Phases = append(res.Phases, Phase{Name: name, Took: spreadOf(phases[j])})
	}
	return res
}

// stageByHand deploys release to a stack of its own by hand, the way a
// careful person does: `pulumi preview`, then `pulumi up` of what it
// showed. It returns how long both took.
func stageByHand(bare func(args ...string) (time.Duration, error), bareDir, outDir, release string) (time.Duration, error) {
	const s = "promo-bare-stage"
	if _, err := bare("stack", "select", "--create", "--stack", s); err != nil {
		return 0, err
	}
	// The stack first runs the release before, untimed.
	if err := os.WriteFile(filepath.Join(bareDir, "Pulumi.yaml"), []byte(promoProgram(outDir, release+"-before")), 0o644); err != nil {
		return 0, err
	}
	if _, err := bare("up", "--stack", s, "--yes", "--skip-preview"); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(bareDir, "Pulumi.yaml"), []byte(promoProgram(outDir, release)), 0o644); err != nil {
		return 0, err
	}
	preview, err := bare("preview", "--stack", s)
	if err != nil {
		return 0, err
	}
	up, err := bare("up", "--stack", s, "--yes", "--skip-preview")
	return preview + up, err
}

// releaseOf is the name of the Release of commit sha in ns, or "".
func releaseOf(ctx context.Context, h *harness, ns, sha string) string {
	var list promotionv1alpha1.ReleaseList
	if err := h.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return ""
	}
	for _, r := range list.Items {
		if r.Spec.Commit.SHA == sha {
			return r.Name
		}
	}
	return ""
}

// waitCommit polls the Stack every 20 ms until it is Ready with commit as
// its last successful one, and returns when that was first seen.
func waitCommit(ctx context.Context, h *harness, ns, name, commit string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var s pulumiv1.Stack
	for {
		err := h.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
		now := time.Now()
		if err == nil && sreconcile.IsReady(s.Status.Conditions) && s.Status.LastUpdate != nil &&
			s.Status.LastUpdate.LastSuccessfulCommit == commit {
			return now, nil
		}
		if now.After(deadline) {
			return now, fmt.Errorf("Stack %s/%s not Ready at commit %s after %s: %v; last update %+v",
				ns, name, commit, timeout, err, s.Status.LastUpdate)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pulumiIn runs the pinned CLI in dir against the shared backend and
// returns how long it took.
func (h *harness) pulumiIn(dir string, args ...string) (time.Duration, error) {
	return pulumiOn(h.backend, dir, args...)
}

// pulumiOn runs the pinned CLI in dir against the file backend in
// backend and returns how long it took.
func pulumiOn(backend, dir string, args ...string) (time.Duration, error) {
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+backend)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return took, nil
}
