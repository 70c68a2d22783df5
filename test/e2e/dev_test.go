// Package e2e runs stackyard's binaries the way a person does. TestDev is
// the README's first command: `stackyard dev` must bring the sample Stack to
// Ready on its own, shut everything down on Ctrl-C, and pick up where it
// left off when started again.
package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/testenv"
)

// devRun is one `stackyard dev` process.
type devRun struct {
	cmd    *exec.Cmd
	output *testenv.SyncBuffer
	ready  chan struct{}
}

// startDev starts `stackyard dev` over stateDir and waits until it says it
// is running.
func startDev(t *testing.T, bin, stateDir string) *devRun {
	t.Helper()
	cmd := devCommand(bin, stateDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	run := &devRun{cmd: cmd, output: &testenv.SyncBuffer{}, ready: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			_, _ = run.output.Write([]byte(sc.Text() + "\n"))
			if !once && strings.Contains(sc.Text(), "stackyard is running") {
				once = true
				close(run.ready)
			}
		}
	}()
	select {
	case <-run.ready:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("stackyard dev did not come up:\n%s", run.output)
	}
	return run
}

// devCommand is `stackyard dev` over stateDir with the pinned tools of
// this checkout, extra flags appended.
func devCommand(bin, stateDir string, extra ...string) *exec.Cmd {
	args := append([]string{"dev", "--state-dir", stateDir, "--bin-dir", testenv.BinDir(),
		"--crd-dir", filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"), "--policy-dir", testenv.PolicyDir(),
		"--webhook-dir", filepath.Join(testenv.RepoRoot(), "config", "webhook"),
		"--dashboard-bind-address", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	return cmd
}

// stop interrupts the process as Ctrl-C does and waits for a clean exit.
func (r *devRun) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stackyard dev exited with %v:\n%s", err, r.output)
		}
	case <-time.After(2 * time.Minute):
		_ = r.cmd.Process.Kill()
		t.Fatalf("stackyard dev did not stop on SIGINT:\n%s", r.output)
	}
}

// devClient reads the dev control plane through the kubeconfig it wrote,
// knowing the kinds adders register.
func devClient(t *testing.T, stateDir string, adders ...func(*k8sruntime.Scheme) error) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range adders {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// processesUnder lists the running processes whose command line mentions
// dir: after a clean stop there must be none (etcd, kube-apiserver, agents).
func processesUnder(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(data), dir) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if fields := strings.Fields(string(stat)); len(fields) > 2 && fields[2] == "Z" {
			continue // a zombie is already gone; this sandbox's PID 1 does not reap
		}
		found = append(found, strings.ReplaceAll(string(data), "\x00", " "))
	}
	return found
}

// prepare checks that the control plane and Pulumi binaries (and extra)
// are built, isolates Pulumi's home in a new temporary directory and builds
// the stackyard binary there; it returns the directory and the binary.
func prepare(t *testing.T, extra ...string) (tmp, bin string) {
	t.Helper()
	if err := testenv.RequireBinaries(append(append([]string{"etcd", "kube-apiserver"}, extra...), testenv.PulumiBinaries...)...); err != nil {
		t.Fatal(err)
	}
	tmp = t.TempDir()
	if err := testenv.IsolatePulumi(tmp, "unused"); err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BuildStackyard(tmp)
	if err != nil {
		t.Fatal(err)
	}
	return tmp, bin
}

func TestDev(t *testing.T) {
	g := NewWithT(t)
	tmp, bin := prepare(t)
	stateDir := filepath.Join(tmp, "state")

	// The binary says which commit it was built from, and when.
	version, err := exec.Command(bin, "version").Output()
	g.Expect(err).NotTo(HaveOccurred())
	head, err := exec.Command("git", "-C", testenv.RepoRoot(), "rev-parse", "HEAD").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(version)).To(MatchRegexp(`(?m)^stackyard \S+\ncommit: %s(-dirty)?\nbuilt: \d{4}-\d\d-\d\dT`, strings.TrimSpace(string(head))))

	run := startDev(t, bin, stateDir)
	c := devClient(t, stateDir, pulumiv1.AddToScheme)
	var stack pulumiv1.Stack
	key := client.ObjectKey{Namespace: "default", Name: "sample"}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), key, &stack)).To(Succeed())
		g.Expect(sreconcile.IsReady(stack.Status.Conditions)).To(BeTrue())
	}, 4*time.Minute, time.Second).Should(Succeed(), func() string { return run.output.String() })
	greeting, err := os.ReadFile(filepath.Join(stateDir, "sample-output", "greeting.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(greeting)).To(Equal("hello from stackyard dev"))

	// A commit in the sample repository reaches the Stack through the
	// Receiver the repository's git hooks post to, not through a poll.
	commit := exec.Command("git", "-c", "user.name=dev", "-c", "user.email=dev@example.invalid", "commit", "-q", "--allow-empty", "-m", "a new commit")
	commit.Dir = filepath.Join(stateDir, "git", "sample")
	out, err := commit.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).NotTo(ContainSubstring("Error"), "the git hook failed")
	head, err = exec.Command("git", "-C", commit.Dir, "rev-parse", "HEAD").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), key, &stack)).To(Succeed())
		g.Expect(stack.Annotations).To(HaveKeyWithValue(shared.ReconcileRequestAnnotation, HavePrefix("receiver/sample/")))
		g.Expect(stack.Status.LastUpdate).NotTo(BeNil())
		g.Expect(stack.Status.LastUpdate.LastSuccessfulCommit).To(Equal(strings.TrimSpace(string(head))))
		g.Expect(sreconcile.IsReady(stack.Status.Conditions)).To(BeTrue())
	}, 2*time.Minute, time.Second).Should(Succeed(), func() string { return run.output.String() })
	firstUpdate := stack.Status.LastUpdate.Name
	checkDevDashboard(t, run)
	run.stop(t)
	g.Eventually(func() []string { return processesUnder(stateDir) }, 30*time.Second, time.Second).Should(BeEmpty())

	// A restart keeps everything: the same Stack, Ready, with no new update
	// needed for an unchanged program.
	run = startDev(t, bin, stateDir)
	c = devClient(t, stateDir, pulumiv1.AddToScheme)
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), key, &stack)).To(Succeed())
		g.Expect(sreconcile.IsReady(stack.Status.Conditions)).To(BeTrue())
	}, 2*time.Minute, time.Second).Should(Succeed())
	g.Expect(stack.Status.LastUpdate.Name).To(Equal(firstUpdate))
	run.stop(t)
	g.Eventually(func() []string { return processesUnder(stateDir) }, 30*time.Second, time.Second).Should(BeEmpty())
}

// dashboardLine is what `stackyard dev` prints about its dashboard.
var dashboardLine = regexp.MustCompile(`dashboard: +(http://\S+) \(sign in with the token in (\S+)\)`)

// checkDevDashboard signs in to the dashboard `stackyard dev` serves, with
// the token it wrote, and finds the sample Stack on the Stacks page.
func checkDevDashboard(t *testing.T, run *devRun) {
	t.Helper()
	m := dashboardLine.FindStringSubmatch(run.output.String())
	if m == nil {
		t.Fatalf("stackyard dev printed no dashboard line:\n%s", run.output)
	}
	token, err := os.ReadFile(m[2])
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, m[1]+"/stacks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-stack="default/sample"`) {
		t.Fatalf("GET %s/stacks: %s, want 200 listing default/sample:\n%s", m[1], resp.Status, body)
	}
}
