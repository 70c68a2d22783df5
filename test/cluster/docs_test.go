//go:build cluster

package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stackyard/stackyard/test/gitserver"
)

// A guide's blocks, by the language of their fence.
const (
	// runnableLang marks a block TestDocs runs.
	runnableLang = "sh"
	// outputLang, right after a runnable block, holds lines its output
	// must contain.
	outputLang = "text"
)

// shellLangs are fences that would hold commands TestDocs does not run:
// refused in the guides it runs, so that every command there is run.
var shellLangs = map[string]bool{"bash": true, "shell": true, "console": true, "zsh": true, "shell-session": true, "": true}

// docBlock is one runnable block of a guide.
type docBlock struct {
	line   int      // of its opening fence, 1-based
	script string   // the commands
	want   []string // lines of the output block after it, if any
}

// docBlocks reads the runnable blocks of a Markdown guide, in order.
func docBlocks(path string) ([]docBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks  []docBlock
		sc      = bufio.NewScanner(f)
		n       int
		inFence bool
		lang    string
		start   int
		body    []string
		// afterRunnable: only blank lines since a runnable block closed.
		afterRunnable bool
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !inFence {
			if fence, ok := strings.CutPrefix(trimmed, "```"); ok {
				inFence, lang, start, body = true, strings.TrimSpace(fence), n, nil
				if shellLangs[lang] {
					return nil, fmt.Errorf("%s:%d: a ```%s block; commands go in ```%s blocks, which TestDocs runs, and anything else names its language", path, n, lang, runnableLang)
				}
				if lang == outputLang && !afterRunnable {
					return nil, fmt.Errorf("%s:%d: a ```%s block must follow a ```%s block (it holds that block's expected output)", path, n, outputLang, runnableLang)
				}
				continue
			}
			if trimmed != "" {
				afterRunnable = false
			}
			continue
		}
		if trimmed != "```" {
			body = append(body, line)
			continue
		}
		inFence = false
		switch lang {
		case runnableLang:
			blocks = append(blocks, docBlock{line: start, script: strings.Join(body, "\n") + "\n"})
			afterRunnable = true
			continue
		case outputLang:
			for _, l := range body {
				if l = strings.TrimSpace(l); l != "" {
					blocks[len(blocks)-1].want = append(blocks[len(blocks)-1].want, l)
				}
			}
		}
		afterRunnable = false
	}
	if inFence {
		return nil, fmt.Errorf("%s:%d: unclosed ``` block", path, start)
	}
	return blocks, sc.Err()
}

// docCheck is a check of the cluster after the runnable block whose
// script contains after: what the guide promises but prints nothing for.
type docCheck struct {
	after string
	check func(t *testing.T)
}

// docRun runs guides' blocks in one shell session: each block is its own
// `bash -euo pipefail`, started with the exported variables and the
// working directory the block before it ended with.
type docRun struct {
	dir   string   // the session's first working directory
	env   []string // its first environment
	state string   // a file with the exported variables (`export -p`)
	cwd   string   // a file with the working directory
}

func newDocRun(t *testing.T, dir string, env []string) *docRun {
	t.Helper()
	tmp := t.TempDir()
	r := &docRun{dir: dir, env: env, state: filepath.Join(tmp, "env"), cwd: filepath.Join(tmp, "cwd")}
	if err := os.WriteFile(r.state, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.cwd, []byte(dir), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs every block of the guide at path in order, each followed by
// the checks that name it, and stops at the first that fails.
func (r *docRun) run(t *testing.T, path string, checks []docCheck) {
	t.Helper()
	blocks, err := docBlocks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no ```%s block", path, runnableLang)
	}
	used := map[int]bool{}
	for _, b := range blocks {
		out, err := r.runBlock(t, b)
		where := fmt.Sprintf("%s:%d", filepath.Base(path), b.line)
		t.Logf("%s:\n%s\n--- output:\n%s", where, strings.TrimSpace(b.script), strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("%s: the block failed: %v", where, err)
		}
		if missing := missingLines(out, b.want); len(missing) > 0 {
			t.Fatalf("%s: the output lacks, in order, %q (the guide shows %q)", where, missing, b.want)
		}
		for i, c := range checks {
			if strings.Contains(b.script, c.after) {
				used[i] = true
				c.check(t)
				if t.Failed() {
					t.FailNow()
				}
			}
		}
	}
	for i, c := range checks {
		if !used[i] {
			t.Errorf("%s: no block runs %q, which a check follows", path, c.after)
		}
	}
}

// runBlock runs one block and returns its standard output and error,
// interleaved.
func (r *docRun) runBlock(t *testing.T, b docBlock) (string, error) {
	t.Helper()
	script := fmt.Sprintf("set -euo pipefail\nsource %q\ncd \"$(cat %q)\"\n%s\nexport -p > %q\npwd > %q\n",
		r.state, r.cwd, b.script, r.state, r.cwd)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// missingLines returns the lines of want, from the first one missing,
// unless each is a line of out (spaces around ignored) after the one
// before.
func missingLines(out string, want []string) []string {
	lines := strings.Split(out, "\n")
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.TrimSpace(l) == want[i] {
			i++
		}
	}
	return want[i:]
}

// TestDocs runs docs/install.md and docs/quickstart.md as a reader would,
// every ```sh block in order, from a directory standing for a clone of the
// repository, with the images `make images` built and, for the quickstart,
// a git repository served to the cluster. The output blocks of the guides
// are checked, and so is what they promise without printing it: that an
// uninstall leaves only the CRDs, that a deleted Stack was destroyed.
func TestDocs(t *testing.T) {
	c := connect(t)
	img := requireImages(t, c)
	root := repoRoot(t)

	clone, env := guideSession(t, root, img)
	docs := filepath.Join(root, "docs")

	t.Run("install", func(t *testing.T) {
		t.Cleanup(func() { cleanUpGuide(t, c, "team-a") })
		uninstalled := docCheck{check: func(t *testing.T) { waitOperatorGone(t, c) }}
		r := newDocRun(t, clone, env)
		r.run(t, filepath.Join(docs, "install.md"), []docCheck{
			{after: "helm uninstall", check: uninstalled.check},
			{after: "kubectl delete -k", check: uninstalled.check},
		})
	})

	t.Run("quickstart", func(t *testing.T) {
		t.Cleanup(func() { cleanUpGuide(t, c, "quickstart") })
		// The repository the reader pushes to, empty, reached by the
		// cluster through the node's address.
		gs := gitserver.New(t)
		repo := gs.CreateRepo("quickstart")
		repo.Git("config", "http.receivepack", "true")
		r := newDocRun(t, clone, append(env, "QUICKSTART_REPO="+serveGitOnNode(t, gs)+"/quickstart.git"))
		r.run(t, filepath.Join(docs, "quickstart.md"), []docCheck{
			{after: "delete stack hello", check: func(t *testing.T) {
				// destroyOnFinalize ran: the checkpoint, on the volume the
				// cluster's default StorageClass made for the guide's
				// claim, is empty.
				stateDir := claimDir(t, c, "quickstart", "quickstart-state")
				if n, err := stateResources(stateDir, "quickstart", "dev"); err != nil || n != 0 {
					t.Errorf("after deleting the Stack its state should hold no resources: %d resources, %v", n, err)
				}
			}},
			{after: "helm uninstall", check: func(t *testing.T) { waitOperatorGone(t, c) }},
		})
	})
}

// guideSession is where a guide's reader stands: a directory standing for
// a clone of the repository (every file and directory a clone has, linked,
// without its history and without what builds leave: bin/, dist/), and
// the environment of their shell: bin/ on the PATH (kubectl, helm, the
// stackyard CLI), a home of their own (where `make install-cli` installs,
// through PREFIX), the cluster's kubeconfig, the images `make images`
// built, and git set up as a reader has it, minus their configuration.
func guideSession(t *testing.T, root string, img images) (clone string, env []string) {
	t.Helper()
	clone = t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", "bin", "dist", ".stackyard":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(clone, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	return clone, []string{
		"PATH=" + filepath.Join(root, "bin") + ":" + os.Getenv("PATH"),
		"HOME=" + home,
		"PREFIX=" + filepath.Join(home, ".local"),
		// The Go caches the tests' own builds use, so that the CLI the
		// install guide builds takes seconds.
		"GOCACHE=" + goEnv(t, "GOCACHE"),
		"GOMODCACHE=" + goEnv(t, "GOMODCACHE"),
		"KUBECONFIG=" + kubeconfigPath(),
		"LANG=C.UTF-8",
		"STACKYARD_REGISTRY=" + img.registry,
		"STACKYARD_VERSION=" + img.tag,
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Guide Reader",
		"GIT_AUTHOR_EMAIL=reader@stackyard.invalid",
		"GIT_COMMITTER_NAME=Guide Reader",
		"GIT_COMMITTER_EMAIL=reader@stackyard.invalid",
	}
}

// claimDir is the host directory of the volume bound to the claim ns/name
// (the test cluster's provisioner makes hostPath volumes).
func claimDir(t *testing.T, c *cluster, ns, name string) string {
	t.Helper()
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.cs.CoreV1().PersistentVolumes().Get(t.Context(), pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the volume of claim %s/%s: %v", ns, name, err)
	}
	if pv.Spec.HostPath == nil {
		t.Fatalf("the volume %s of claim %s/%s is not a host directory: %+v", pv.Name, ns, name, pv.Spec.PersistentVolumeSource)
	}
	return pv.Spec.HostPath.Path
}

// operatorGone lists what is left of an installation of the operator by
// either packaging: its namespace, its cluster-wide objects (named
// stackyard-...), workspace ServiceAccount bindings, workspace pods.
func operatorGone(ctx context.Context, c *cluster) []string {
	var left []string
	if _, err := c.cs.CoreV1().Namespaces().Get(ctx, releaseNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("Namespace %s (%v)", releaseNS, err))
	}
	ours := func(name string) bool {
		return strings.HasPrefix(name, "stackyard") || strings.HasSuffix(name, "-auth-delegator")
	}
	if l, err := c.cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ClusterRole "+o.Name)
			}
		}
	} else {
		left = append(left, "ClusterRoles: "+err.Error())
	}
	if l, err := c.cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ClusterRoleBinding "+o.Name)
			}
		}
	} else {
		left = append(left, "ClusterRoleBindings: "+err.Error())
	}
	if l, err := c.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ValidatingAdmissionPolicy "+o.Name)
			}
		}
	} else {
		left = append(left, "ValidatingAdmissionPolicies: "+err.Error())
	}
	if l, err := c.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range l.Items {
			if ours(o.Name) {
				left = append(left, "ValidatingAdmissionPolicyBinding "+o.Name)
			}
		}
	} else {
		left = append(left, "ValidatingAdmissionPolicyBindings: "+err.Error())
	}
	if l, err := c.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "auto.pulumi.com/component"}); err == nil {
		for _, o := range l.Items {
			left = append(left, "Pod "+o.Namespace+"/"+o.Name)
		}
	} else {
		left = append(left, "Pods: "+err.Error())
	}
	return left
}

// waitOperatorGone waits for operatorGone to find nothing.
func waitOperatorGone(t *testing.T, c *cluster) {
	t.Helper()
	var left []string
	_ = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = operatorGone(ctx, c)
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		t.Errorf("the uninstall left operator-owned objects behind:\n%s", strings.Join(left, "\n"))
	}
	leftCRDs(t.Context(), t, c)
}

// cleanUpGuide removes whatever a guide may have left when it stopped
// half-way, and the CRDs, so that the next test starts from an empty
// cluster.
func cleanUpGuide(t *testing.T, c *cluster, wsNamespace string) {
	if t.Failed() {
		dumpOperator(t, c.cs)
		dumpWorkspacePods(t, c.cs, wsNamespace)
		dumpChange(t, c, wsNamespace)
	}
	tearDown(t, c, wsNamespace)
	removeCRDs(t, c)
}

// dumpChange logs the status of the namespace's Promotions, Stages and
// Stacks: the operator logs little of a promotion's progress, and a guide
// that times out waiting for one says only that it did.
func dumpChange(t *testing.T, c *cluster, ns string) {
	for _, gvr := range []schema.GroupVersionResource{promotionGVR("promotions"), promotionGVR("stages"), stackGVR} {
		list, err := c.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Logf("listing %s: %v", gvr.Resource, err)
			continue
		}
		for _, o := range list.Items {
			status, _, _ := unstructured.NestedMap(o.Object, "status")
			t.Logf("%s %s status:\n%s", gvr.Resource, o.GetName(), toYAML(status))
		}
	}
}

// TestDocBlocks checks how TestDocs reads a guide: ```sh blocks in order
// with the ```text block right after one as its output; any other shell
// fence, or an output block after prose, refused.
func TestDocBlocks(t *testing.T) {
	write := func(t *testing.T, doc string) string {
		p := filepath.Join(t.TempDir(), "guide.md")
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	blocks, err := docBlocks(write(t, "# Guide\n\n```sh\necho one\ncd /tmp\n```\n\n```text\none\n```\n\nProse.\n\n```yaml\nkey: value\n```\n\n```sh\necho two\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].line != 3 || blocks[0].script != "echo one\ncd /tmp\n" ||
		len(blocks[0].want) != 1 || blocks[0].want[0] != "one" || blocks[1].script != "echo two\n" || blocks[1].want != nil {
		t.Errorf("blocks = %+v", blocks)
	}
	for name, doc := range map[string]string{
		"bash fence":           "```bash\necho\n```\n",
		"unlabelled fence":     "```\necho\n```\n",
		"output after prose":   "```sh\necho\n```\n\nIt prints:\n\n```text\n\n```\n",
		"output with no block": "```text\none\n```\n",
		"unclosed":             "```sh\necho\n",
	} {
		if _, err := docBlocks(write(t, doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got := missingLines("a\n  b  \nc\n", []string{"a", "c"}); len(got) != 0 {
		t.Errorf("missing %q", got)
	}
	if got := missingLines("c\na\n", []string{"a", "c"}); len(got) != 1 || got[0] != "c" {
		t.Errorf("out of order: missing %q", got)
	}
}

// goEnv is the value of the go command's variable name.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
