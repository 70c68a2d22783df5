//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// The fleet figure: one release rolled out to the Stacks of one stage in
// waves, against the same previews and ups run by hand.
const (
	// envFleetN is how many Stacks the stage deploys (200 by default).
	envFleetN = "BENCH_FLEET_N"
	// fleetNamespace holds the figure's Stacks.
	fleetNamespace = "fleet"
	fleetHeading   = "## 8. A fleet rollout: one release to a stage's Stacks in waves"
)

// fleetWaves are the stage's waves: a tenth, a quarter, half, then the
// rest (4 waves), with no pause between them.
var fleetWaves = []string{"10%", "25%", "50%"}

// fleetFloorParallelism are the parallelisms the bare CLI's floor is run
// at; the fastest counts.
var fleetFloorParallelism = []int{2, 4}

// FleetRecord is the fleet figure's measurement, kept in
// results/fleet.json and rendered into docs/benchmarks.md.
type FleetRecord struct {
	Machine Machine `json:"machine"`
	// N is how many Stacks the stage deploys; Waves its waves.
	N     int      `json:"n"`
	Waves []string `json:"waves"`
	// Previews is the Promotion created → every Stack previewed;
	// Rollout the Promotion created → Succeeded.
	Previews Seconds `json:"previews"`
	Rollout  Seconds `json:"rollout"`
	// Floor is the same by hand: `pulumi preview` of every stack, then
	// `pulumi up` wave by wave, at FloorParallelism, the fastest of
	// FloorTries (parallelism → seconds).
	Floor            Seconds         `json:"floor"`
	FloorParallelism int             `json:"floorParallelism"`
	FloorTries       map[int]Seconds `json:"floorTries"`
	// FloorPreviews is the previews' part of Floor.
	FloorPreviews Seconds `json:"floorPreviews,omitempty"`
	// Ratio is Rollout / Floor (the target is 1.2).
	Ratio float64 `json:"ratio"`
	// PromotionBytes is the size of the finished Promotion, in bytes of
	// JSON: the API server's storage refuses objects over 1.5 MiB.
	PromotionBytes int `json:"promotionBytes"`
	// Took is the figure's whole wall time.
	Took Seconds `json:"took"`
}

// TestBenchFleet measures the fleet figure (make bench-fleet).
func TestBenchFleet(t *testing.T) {
	log.SetLogger(logr.Discard())
	began := time.Now()
	rec := &FleetRecord{Machine: machineFacts(), N: intsEnv(t, envFleetN, []int{200})[0], Waves: fleetWaves}
	h := startHarness(t, durationEnv(t, envIdleAfter, 10*time.Second))
	benchFleet(t, h, rec)
	rec.Took = Sec(time.Since(began))
	rec.Machine.LoadAfter = loadavg()
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fleetFile(), append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(docFile())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderFleet(&b, rec)
	if err := os.WriteFile(docFile(), []byte(spliceSection(string(doc), fleetHeading, b.String(), fixesHeading)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fleetFile is the committed record of the fleet figure, kept apart from
// the other figures' results because it is measured by a target of its
// own.
func fleetFile() string { return filepath.Join(filepath.Dir(resultsFile()), "fleet.json") }

// readFleet reads the committed fleet record; nil when there is none.
func readFleet() *FleetRecord {
	data, err := os.ReadFile(fleetFile())
	if err != nil {
		return nil
	}
	var rec FleetRecord
	if json.Unmarshal(data, &rec) != nil {
		return nil
	}
	return &rec
}

// benchFleet deploys rec.N Stacks of one program at release-0, promotes
// release-1 into the stage that selects them, and times it; then does the
// same by hand on as many bare stacks.
func benchFleet(t *testing.T, h *harness, rec *FleetRecord) {
	ctx := context.Background()
	h.createNamespace(t, fleetNamespace)
	outDir := t.TempDir()
	repo := h.git.CreateRepo("fleet")
	c0 := repo.Commit("main", map[string]string{"Pulumi.yaml": promoProgram(outDir, "release-0")})
	backend := freshBackend(t)
	labels := map[string]string{"fleet": "web"}
	names := make([]string, rec.N)
	for i := range names {
		names[i] = fmt.Sprintf("f%04d", i)
	}
	if err := inParallel(rec.N, 8, func(i int) error {
		s := h.stack(fleetNamespace, names[i], names[i], "")
		s.Labels = labels
		s.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "fleet"}
		s.Spec.Backend = "file://" + backend
		s.Spec.GitSource = &shared.GitSource{ProjectRepo: repo.URL, Commit: c0}
		delete(s.Spec.Config, project+":message")
		return h.client.Create(ctx, s)
	}); err != nil {
		t.Fatal(err)
	}
	if err := waitFleet(ctx, h, c0, rec.N, burstTimeout(rec.N)); err != nil {
		t.Fatal(err)
	}

	c1 := repo.Commit("main", map[string]string{"Pulumi.yaml": promoProgram(outDir, "release-1")})
	waves := make([]intstr.IntOrString, len(fleetWaves))
	for i, w := range fleetWaves {
		waves[i] = intstr.FromString(w)
	}
	objs := []client.Object{
		&promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: "fleet"},
			// Its branch does not exist: the figure makes its Release.
			Spec: promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: repo.URL, Branch: "releases-are-made-by-the-bench"}}},
		&promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: "release-1",
			Labels: map[string]string{promotionv1alpha1.PipelineLabel: "fleet"}},
			Spec: promotionv1alpha1.ReleaseSpec{Pipeline: "fleet", Commit: promotionv1alpha1.ReleaseCommit{SHA: c1, Branch: "main"}}},
		&promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: "fleet"},
			Spec: promotionv1alpha1.StageSpec{Pipeline: "fleet", StackSelector: &metav1.LabelSelector{MatchLabels: labels},
				Sources: promotionv1alpha1.ReleaseSources{Direct: true}, Rollout: &promotionv1alpha1.Rollout{Waves: waves}}},
	}
	for _, obj := range objs {
		if err := h.client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	stage := &promotionv1alpha1.Stage{}
	if !waitFor(time.Minute, func() bool {
		return h.client.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: "fleet"}, stage) == nil &&
			stage.Status.StackCount == int32(rec.N) && sreconcile.IsReady(stage.Status.Conditions) //nolint:gosec // the figure's N
	}) {
		t.Fatalf("stage fleet never selected the %d Stacks: %+v", rec.N, stage.Status)
	}

	cli, err := pipelinectl.New(h.env.Config, fleetNamespace)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p, err := cli.Promote(ctx, pipelinectl.Request{Stage: "fleet", Release: "release-1", Reason: "the fleet figure"})
	if err != nil {
		t.Fatal(err)
	}
	var previewed time.Time
	if !waitFor(burstTimeout(3*rec.N), func() bool {
		if h.client.Get(ctx, client.ObjectKeyFromObject(p), p) != nil {
			return false
		}
		if previewed.IsZero() && int(p.Status.Previewed) == rec.N {
			previewed = time.Now()
		}
		return p.Status.Phase.IsFinished()
	}) || p.Status.Phase != promotionv1alpha1.PromotionSucceeded {
		t.Fatalf("the rollout did not succeed: %s: %s", p.Status.Phase, p.Status.Message)
	}
	took := time.Since(start)
	if previewed.IsZero() {
		previewed = time.Now()
	}
	rec.Previews, rec.Rollout = Sec(previewed.Sub(start)), Sec(took)
	if data, err := json.Marshal(p); err == nil {
		rec.PromotionBytes = len(data)
	}
	t.Logf("%d Stacks: previewed after %.1fs, rolled out after %.1fs", rec.N, rec.Previews, rec.Rollout)

	members := make([]change.RolloutMember, rec.N)
	for i, name := range names {
		members[i] = change.RolloutMember{Name: name, Labels: labels}
	}
	waveOf, count, err := change.Waves(&promotionv1alpha1.Rollout{Waves: waves}, "fleet", members)
	if err != nil {
		t.Fatal(err)
	}
	byWave := make([][]string, count)
	for _, name := range names {
		byWave[waveOf[name]-1] = append(byWave[waveOf[name]-1], name)
	}
	fleetFloor(t, rec, outDir, names, byWave)
}

// waitFleet waits until n Stacks of the fleet namespace are Ready at
// commit.
func waitFleet(ctx context.Context, h *harness, commit string, n int, timeout time.Duration) error {
	ready := 0
	if waitFor(timeout, func() bool {
		var list pulumiv1.StackList
		if h.client.List(ctx, &list, client.InNamespace(fleetNamespace)) != nil {
			return false
		}
		ready = 0
		for i := range list.Items {
			s := &list.Items[i]
			if sreconcile.IsReady(s.Status.Conditions) && s.Status.LastUpdate != nil && s.Status.LastUpdate.LastSuccessfulCommit == commit {
				ready++
			}
		}
		return ready == n
	}) {
		return nil
	}
	return fmt.Errorf("%d of %d Stacks Ready at %s after %s", ready, n, commit, timeout)
}

// fleetFloor is the figure's floor: the bare CLI's stacks, one per Stack,
// first up at release-0 (untimed), then, at each parallelism, a new
// release previewed on every stack and deployed wave by wave.
func fleetFloor(t *testing.T, rec *FleetRecord, outDir string, names []string, byWave [][]string) {
	backend, dir := freshBackend(t), t.TempDir()
	write := func(release string) {
		if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(promoProgram(outDir, release)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bare := func(args ...string) error {
		_, err := pulumiOn(backend, dir, args...)
		return err
	}
	write("release-0")
	if err := inParallel(len(names), slices.Max(fleetFloorParallelism), func(i int) error {
		if err := bare("stack", "init", "--no-select", "--stack", "bare-"+names[i]); err != nil {
			return err
		}
		return bare("up", "--stack", "bare-"+names[i], "--yes", "--skip-preview")
	}); err != nil {
		t.Fatal(err)
	}
	rec.FloorTries = map[int]Seconds{}
	for k, par := range fleetFloorParallelism {
		write(fmt.Sprintf("release-%d", k+1))
		start := time.Now()
		if err := inParallel(len(names), par, func(i int) error { return bare("preview", "--stack", "bare-"+names[i]) }); err != nil {
			t.Fatal(err)
		}
		previews := Sec(time.Since(start))
		for _, wave := range byWave {
			if err := inParallel(len(wave), par, func(i int) error {
				return bare("up", "--stack", "bare-"+wave[i], "--yes", "--skip-preview")
			}); err != nil {
				t.Fatal(err)
			}
		}
		took := Sec(time.Since(start))
		rec.FloorTries[par] = took
		if rec.Floor == 0 || took < rec.Floor {
			rec.Floor, rec.FloorParallelism, rec.FloorPreviews = took, par, previews
		}
		t.Logf("by hand at parallelism %d: %.1fs", par, took)
	}
	rec.Ratio = float64(rec.Rollout) / float64(rec.Floor)
}

// renderFleet writes figure 8 from rec.
func renderFleet(b *strings.Builder, rec *FleetRecord) {
	fmt.Fprintf(b, "%s\n\n", fleetHeading)
	fmt.Fprintf(b, "`make bench-fleet` (BENCH_FLEET_N=%d): a stage selects %d Stacks of one program by label and rolls\n", rec.N, rec.N)
	fmt.Fprintf(b, "a release out to them in %d waves (`waves: [%s]`, then the rest; no pause, no checks, every Stack of a\n",
		len(rec.Waves)+1, strings.Join(rec.Waves, ", "))
	b.WriteString("wave at once, previews 20 at a time). The floor is the same by hand: `pulumi preview` of every stack,\n")
	b.WriteString("then `pulumi up` wave by wave, on as many bare stacks of the file backend, at the fastest parallelism tried.\n\n")
	b.WriteString("| Measure | Seconds |\n|---|---|\n")
	fmt.Fprintf(b, "| Promotion created → every Stack previewed | %.1f |\n", rec.Previews)
	fmt.Fprintf(b, "| Promotion created → Succeeded | %.1f |\n", rec.Rollout)
	pars := make([]int, 0, len(rec.FloorTries))
	for p := range rec.FloorTries {
		pars = append(pars, p)
	}
	slices.Sort(pars)
	for _, p := range pars {
		fmt.Fprintf(b, "| by hand, %d at a time | %.1f |\n", p, rec.FloorTries[p])
	}
	if rec.FloorPreviews > 0 {
		ups, floorUps := rec.Rollout-rec.Previews, rec.Floor-rec.FloorPreviews
		fmt.Fprintf(b, "\nWhere it goes: the previews take %.1f s against %.1f s by hand (%.1f×); the waves' ups take %.1f s\n",
			rec.Previews, rec.FloorPreviews, float64(rec.Previews)/float64(rec.FloorPreviews), ups)
		fmt.Fprintf(b, "against %.1f s by hand (%.1f×). Each preview runs in a Workspace of its own, whose agent starts cold;\n",
			floorUps, float64(ups)/float64(floorUps))
		b.WriteString("by hand, one CLI process previews each stack.\n")
	}
	fmt.Fprintf(b, "\nRatio to the floor: **%.2f×** (target 1.2×). The finished Promotion is %d bytes of JSON (the API\n", rec.Ratio, rec.PromotionBytes)
	b.WriteString("server's storage refuses objects over 1,572,864); each Stack's preview is a StackPromotion of its own.\n")
	fmt.Fprintf(b, "Measured on %s, %d cores, in %.0f s.\n\n", rec.Machine.CPU, rec.Machine.Cores, rec.Took)
}
