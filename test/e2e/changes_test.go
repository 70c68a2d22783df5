package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/testenv"
)

// walkthrough is the page whose commands TestChangeManagementWalkthrough
// runs.
var walkthrough = filepath.Join(testenv.RepoRoot(), "docs", "change-management.md")

// shellBlocks returns the ```sh blocks of a Markdown page, in order: the
// commands a reader types (a block without a language, such as `make dev`,
// is shown, not run).
func shellBlocks(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```\n").FindAllSubmatch(data, -1) {
		blocks = append(blocks, string(m[1]))
	}
	return blocks
}

// TestChangeManagementWalkthrough runs docs/change-management.md as a
// reader does, against `stackyard dev` and the real binaries in a bin/ of
// the reader's: commits to the sample repository become releases, dev and
// dev2 take them in parallel, qa only after both verified them and they
// soaked, prod by hand through the CLI, a rollback through the CLI. Then it
// restarts `stackyard dev` (the operator with it) and checks the audit
// history reads the same, and that the soak was honoured according to the
// objects' own timestamps.
func TestChangeManagementWalkthrough(t *testing.T) {
	g := NewWithT(t)
	tmp, stackyard := prepare(t, "kubectl")

	// The reader's checkout: bin/ as `make dev` leaves it, .stackyard/ as
	// `make dev` makes it.
	work := filepath.Join(tmp, "work")
	bin := filepath.Join(work, "bin")
	g.Expect(os.MkdirAll(bin, 0o755)).To(Succeed())
	entries, err := os.ReadDir(testenv.BinDir())
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if e.Name() == "stackyard" || e.Name() == local.LeanAgent {
			continue // what `make dev` left there; the binary under test takes its place
		}
		g.Expect(os.Symlink(filepath.Join(testenv.BinDir(), e.Name()), filepath.Join(bin, e.Name()))).To(Succeed())
	}
	g.Expect(os.Symlink(stackyard, filepath.Join(bin, "stackyard"))).To(Succeed())
	stateDir := filepath.Join(work, ".stackyard")

	run := startDev(t, stackyard, stateDir)
	blocks := shellBlocks(t, walkthrough)
	g.Expect(len(blocks)).To(BeNumerically(">=", 8), "the walkthrough lost its commands")
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Reader", "GIT_AUTHOR_EMAIL=reader@example.com",
		"GIT_COMMITTER_NAME=Reader", "GIT_COMMITTER_EMAIL=reader@example.com")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		run.stop(t)
		t.Fatalf("the walkthrough failed: %v\n%s\nstackyard dev:\n%s", err, out.String(), run.output)
	}
	t.Logf("the walkthrough's output:\n%s", out.String())
	g.Expect(out.String()).To(ContainSubstring("end-of-year freeze"), "a promotion into a frozen stage must say why it was refused")

	c := devClient(t, stateDir, promotionv1alpha1.AddToScheme)
	checkSoak(t, c)
	before := history(t, work)
	g.Expect(before).To(ContainElement(HaveField("Rollback", true)))
	g.Expect(before).To(ContainElement(And(HaveField("Event", promotionv1alpha1.EventPromotionFinished), HaveField("Stage", "prod"),
		HaveField("Phase", string(promotionv1alpha1.PromotionSucceeded)))))
	g.Expect(before).To(ContainElement(And(HaveField("Event", promotionv1alpha1.EventPromotionRequested), HaveField("Stage", "prod"),
		HaveField("By", Not(Equal(promotionv1alpha1.RequestedByAutoPromotion))))), "a person's promotion names the person")

	// The operator restarts with `stackyard dev`: the record is the same.
	run.stop(t)
	run = startDev(t, stackyard, stateDir)
	defer run.stop(t)
	g.Expect(history(t, work)).To(Equal(before))
}

// history runs `stackyard history -o json` in the reader's checkout.
func history(t *testing.T, work string) []pipelinectl.HistoryEntry {
	t.Helper()
	cmd := exec.Command(filepath.Join(work, "bin", "stackyard"), "history", "-o", "json",
		"--kubeconfig", filepath.Join(work, ".stackyard", "kubeconfig"))
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("stackyard history: %v", err)
	}
	var list pipelinectl.List[pipelinectl.HistoryEntry]
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("stackyard history -o json: %v\n%s", err, data)
	}
	if list.APIVersion != pipelinectl.OutputAPIVersion || list.Kind != "History" {
		t.Errorf("history printed %s %s", list.APIVersion, list.Kind)
	}
	return list.Items
}

// checkSoak checks, from the objects' own timestamps, that each automatic
// promotion into qa was asked for only after its release had been
// verified in both dev and dev2 and had soaked there for qa's
// requiredSoakTime.
func checkSoak(t *testing.T, c client.Client) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	var qa promotionv1alpha1.Stage
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "qa"}, &qa)).To(Succeed())
	soak := qa.Spec.Sources.RequiredSoakTime.Duration
	g.Expect(soak).To(BeNumerically(">", 0))
	var promotions promotionv1alpha1.PromotionList
	g.Expect(c.List(ctx, &promotions, client.InNamespace("default"))).To(Succeed())
	checked := 0
	for _, p := range promotions.Items {
		if p.Spec.Stage != "qa" || p.Spec.RequestedBy != promotionv1alpha1.RequestedByAutoPromotion {
			continue
		}
		var r promotionv1alpha1.Release
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: p.Spec.Release}, &r)).To(Succeed())
		for _, up := range []string{"dev", "dev2"} {
			v, ok := r.Status.VerifiedIn[up]
			g.Expect(ok).To(BeTrue(), "%s went to qa unverified in %s", r.Name, up)
			g.Expect(p.CreationTimestamp.Time).To(BeTemporally(">=", v.Since.Add(soak)),
				"%s was promoted into qa before it soaked %s in %s", r.Name, soak, up)
		}
		checked++
	}
	g.Expect(checked).To(Equal(2), "two releases went to qa by themselves")
}
