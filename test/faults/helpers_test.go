package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/provider"
	"github.com/stackyard/stackyard/test/testenv"
)

// program is the Pulumi YAML project most scenarios deploy: per stack, a
// file whose content is the message config value (the write each change
// makes), a file that never changes, and a Sleep of pause seconds (config,
// 0 by default) that the message file waits for, to stretch an update.
// extra is added to the resources section as is.
func program(outDir, extra string) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
config:
  message:
    type: string
    default: hello
  pause:
    type: integer
    default: 0
resources:
  wait:
    type: stackyardtest:index:Sleep
    properties:
      seconds: ${pause}
  greeting:
    type: stackyardtest:index:File
    properties:
      path: %s/${pulumi.stack}.txt
      content: ${message}
    options:
      dependsOn:
        - ${wait}
  static:
    type: stackyardtest:index:File
    properties:
      path: %s/${pulumi.stack}-static.txt
      content: written once
%s`, project, outDir, outDir, extra)
}

// newNamespace creates the namespace of one scenario, named from prefix,
// and returns it with the path of the provider journal its Stacks write.
func (s *suite) newNamespace(t *testing.T, prefix string) (ns, journal string) {
	t.Helper()
	ns = s.env.NewNamespace(t, prefix)
	return ns, filepath.Join(s.tmp, ns+".journal")
}

// newRepo creates a repository holding Pulumi.yaml with text on main and
// returns its URL.
func (s *suite) newRepo(name, text string) string {
	repo := s.git.CreateRepo(name)
	repo.Commit("main", map[string]string{"Pulumi.yaml": text})
	return repo.URL
}

// stackOf returns a Stack ns/name deploying the Pulumi stack of the same
// name from repoURL into the shared backend, with message as its config,
// the provider's journal at journal, and quick retries.
func (s *suite) stackOf(ns, name, repoURL, message, journal string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: shared.StackSpec{
			Stack:     name,
			Backend:   "file://" + s.backend,
			GitSource: &shared.GitSource{ProjectRepo: repoURL, Branch: "main"},
			EnvRefs: map[string]shared.ResourceRef{
				"PULUMI_CONFIG_PASSPHRASE": shared.NewLiteralResourceRef(passphrase),
				provider.JournalEnv:        shared.NewLiteralResourceRef(journal),
			},
			Config: map[string]apiextensionsv1.JSON{project + ":message": jsonValue(message)},
			// A failed update is retried after a second, not ten.
			RetryMaxBackoffDurationSeconds: 1,
		},
	}
}

// deployStacks creates n Stacks in ns (named ns-0, ns-1, ...) from
// repoURL with message v0, waits until they are all Ready, and returns
// their names and how long that took.
func (s *suite) deployStacks(t *testing.T, ns, repoURL, journal string, n int) ([]string, time.Duration) {
	t.Helper()
	began := time.Now()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", ns, i)
		if err := s.client.Create(context.Background(), s.stackOf(ns, name, repoURL, "v0", journal)); err != nil {
			fatal(t, err)
		}
		names = append(names, name)
	}
	s.waitConverged(t, ns, 3*time.Minute, names...)
	return names, time.Since(began)
}

// jsonValue is v as a JSON config value.
func jsonValue(v any) apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return apiextensionsv1.JSON{Raw: b}
}

// setConfig patches the Stack's config values (JSON-encodable values by
// key without the project prefix) and returns its new generation.
func (s *suite) setConfig(t *testing.T, ns, name string, values map[string]any) int64 {
	t.Helper()
	ctx := context.Background()
	var st pulumiv1.Stack
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
		fatal(t, err)
	}
	patch := client.MergeFrom(st.DeepCopy())
	for k, v := range values {
		st.Spec.Config[project+":"+k] = jsonValue(v)
	}
	if err := s.client.Patch(ctx, &st, patch); err != nil {
		fatalf(t, "changing the config of Stack %s/%s: %v", ns, name, err)
	}
	return st.Generation
}

// getStack reads Stack ns/name.
func (s *suite) getStack(t *testing.T, ns, name string) *pulumiv1.Stack {
	t.Helper()
	var st pulumiv1.Stack
	if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
		fatal(t, err)
	}
	return &st
}

// errGiveUp, returned by a waitFor condition, ends the wait at once: what
// is awaited can no longer happen.
const errGiveUp = "give up: "

// waitFor polls cond every 250 ms until it returns "" or timeout passes,
// and then fails the test with what cond last said was missing. A reason
// starting with errGiveUp fails it at once.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := cond()
		if missing == "" {
			return
		}
		if strings.HasPrefix(missing, errGiveUp) {
			fatalf(t, "%s: %s", what, missing)
		}
		if time.Now().After(deadline) {
			fatalf(t, "%s: not within %s: %s", what, timeout, missing)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// converged says what keeps Stack st from being Ready at its latest
// generation with a successful last update, or "" when nothing does.
func converged(st *pulumiv1.Stack) string {
	ready := apimeta.FindStatusCondition(st.Status.Conditions, sreconcile.ReadyCondition)
	lu := st.Status.LastUpdate
	switch {
	case st.Status.ObservedGeneration != st.Generation:
		return fmt.Sprintf("%s: observed generation %d of %d; %s", st.Name, st.Status.ObservedGeneration, st.Generation, describe(st))
	case ready == nil || ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("%s: not Ready; %s", st.Name, describe(st))
	case lu == nil || lu.Generation != st.Generation || lu.State != shared.SucceededStackStateMessage:
		return fmt.Sprintf("%s: last update is not a success at generation %d; %s", st.Name, st.Generation, describe(st))
	}
	return ""
}

// stallPatience is how long waitConverged lets a Stack stay stalled on
// failed updates before it gives up on it.
const stallPatience = 20 * time.Second

// waitConverged waits until every Stack of names in ns has converged.
func (s *suite) waitConverged(t *testing.T, ns string, timeout time.Duration, names ...string) {
	t.Helper()
	stalledSince := map[string]time.Time{}
	waitFor(t, timeout, "Stacks Ready at their latest generation", func() string {
		for _, name := range names {
			var st pulumiv1.Stack
			if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
				return err.Error()
			}
			if why := converged(&st); why != "" {
				// A Stack stalled on failed updates waits for a person;
				// one that has just been given a change may still be
				// shown stalled for a moment.
				c := condition(&st, sreconcile.StalledCondition)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != pulumiv1.UpdateFailedReason {
					delete(stalledSince, name)
				} else if since, ok := stalledSince[name]; !ok {
					stalledSince[name] = time.Now()
				} else if time.Since(since) > stallPatience {
					return errGiveUp + why
				}
				return why
			}
		}
		return ""
	})
}

// describe summarizes a Stack's status for a failure message.
func describe(st *pulumiv1.Stack) string {
	var b strings.Builder
	for _, c := range st.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s); ", c.Type, c.Status, c.Reason, c.Message)
	}
	if lu := st.Status.LastUpdate; lu != nil {
		fmt.Fprintf(&b, "lastUpdate %s %s gen %d failures %d: %s; ", lu.Name, lu.State, lu.Generation, lu.Failures, lu.Message)
	}
	if cu := st.Status.CurrentUpdate; cu != nil {
		fmt.Fprintf(&b, "currentUpdate %s gen %d", cu.Name, cu.Generation)
	}
	return b.String()
}

// describeWorkspace summarizes the status of Workspace ns/name (the
// Stack's of the same name) for a failure message.
func (s *suite) describeWorkspace(ns, name string) string {
	var ws autov1alpha1.Workspace
	if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ws); err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Workspace %s generation %d: ", name, ws.Generation)
	for _, c := range ws.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s); ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// condition returns the Stack's condition typ, or nil.
func condition(st *pulumiv1.Stack, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(st.Status.Conditions, typ)
}

// updates lists the Updates of namespace ns.
func (s *suite) updates(t *testing.T, ns string) []autov1alpha1.Update {
	t.Helper()
	var list autov1alpha1.UpdateList
	if err := s.client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		fatal(t, err)
	}
	return list.Items
}

// inProgress returns the Updates of ns whose operation is still marked as
// running or waiting (Progressing=True).
func (s *suite) inProgress(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for _, u := range s.updates(t, ns) {
		if apimeta.IsStatusConditionTrue(u.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing) {
			out = append(out, u.Name)
		}
	}
	return out
}

// failureReason returns the reason of an Update's Failed condition.
func failureReason(u *autov1alpha1.Update) string {
	if c := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

// readJournal returns the provider's journal at path (none if it does not
// exist yet).
func readJournal(t *testing.T, path string) []provider.JournalEntry {
	t.Helper()
	entries, err := provider.ReadJournal(path)
	if err != nil {
		fatal(t, err)
	}
	return entries
}

// resourceName returns the last part of a URN, the resource's name.
func resourceName(urn string) string {
	return urn[strings.LastIndex(urn, "::")+2:]
}

// stackOfURN returns the stack part of a URN
// (urn:pulumi:<stack>::<project>::<type>::<name>).
func stackOfURN(urn string) string {
	rest := strings.TrimPrefix(urn, "urn:pulumi:")
	stack, _, _ := strings.Cut(rest, "::")
	return stack
}

// pulumiCLI runs the pinned CLI on the shared backend, outside any
// project, and returns its stdout.
func (s *suite) pulumiCLI(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = s.tmp
	cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+s.backend)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		fatalf(t, "pulumi %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// fullName is the backend's name of Pulumi stack name.
func fullName(name string) string { return "organization/" + project + "/" + name }

// history returns the Pulumi stack history of stack name, newest first,
// as `pulumi stack history --json` prints it.
func (s *suite) history(t *testing.T, name string) []historyEntry {
	t.Helper()
	var out []historyEntry
	if err := json.Unmarshal(s.pulumiCLI(t, "stack", "history", "--stack", fullName(name), "--json", "--page-size", "100000"), &out); err != nil {
		fatalf(t, "decoding the history of %s: %v", name, err)
	}
	return out
}

// historyEntry is one update of `pulumi stack history --json`.
type historyEntry struct {
	Kind            string                   `json:"kind"`
	Result          string                   `json:"result"`
	StartTime       time.Time                `json:"startTime"`
	EndTime         time.Time                `json:"endTime"`
	Config          map[string]historyConfig `json:"config"`
	ResourceChanges map[string]int           `json:"resourceChanges"`
}

// historyConfig is one config value of a history entry.
type historyConfig struct {
	Value  string `json:"value"`
	Secret bool   `json:"secret"`
}

// checkpoint returns the deployment of stack name, as `pulumi stack
// export` prints it: the state every later update starts from.
func (s *suite) checkpoint(t *testing.T, name string) apitype.DeploymentV3 {
	t.Helper()
	var untyped apitype.UntypedDeployment
	if err := json.Unmarshal(s.pulumiCLI(t, "stack", "export", "--stack", fullName(name)), &untyped); err != nil {
		fatalf(t, "decoding the export of %s: %v", name, err)
	}
	var d apitype.DeploymentV3
	if err := json.Unmarshal(untyped.Deployment, &d); err != nil {
		fatalf(t, "decoding the deployment of %s: %v", name, err)
	}
	return d
}

// locks lists the lock files of stack name in the backend: one is left
// behind by a CLI that died holding it. The blob library's attribute
// sidecars (".attrs") are not locks: the CLI writes a lock's sidecar before
// the lock itself, so a CLI killed between the two leaves a sidecar alone,
// which no CLI lists as a lock and which names a lock (a random UUID) that
// is never taken again.
func (s *suite) locks(name string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(s.backend, ".pulumi", "locks"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == name && !strings.HasSuffix(path, ".attrs") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// checkState fails the test when stack name's state holds pending
// operations or a lock, and returns its history.
func (s *suite) checkState(t *testing.T, name string) []historyEntry {
	t.Helper()
	d := s.checkpoint(t, name)
	for _, op := range d.PendingOperations {
		errorf(t, "stack %s: pending operation %s %s left in the checkpoint", name, op.Type, op.Resource.URN)
	}
	if l := s.locks(name); len(l) > 0 {
		errorf(t, "stack %s: lock left behind: %v", name, l)
	}
	return s.history(t, name)
}

// readFile returns the content of a file the program wrote.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		fatal(t, err)
	}
	return string(b)
}
