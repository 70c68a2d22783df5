package faults

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// revisionProgram is program with the unchanging file's content set to
// revision, so each commit of it has an effect to check.
func (s *suite) revisionProgram(revision string) string {
	return strings.Replace(program(s.outDir, ""), "content: written once", "content: "+revision, 1)
}

// testGitUnreachable takes the git host away (connections refused) while a
// Stack has a new commit to deploy, GitOutages times, for a random while:
// the Stack must say it cannot reach the repository (Reconciling, not
// Stalled, not silent), and deploy the commit once the host is back with
// nothing else done.
func (s *suite) testGitUnreachable(t *testing.T) {
	rnd := seeded(t)
	ns, journal := s.newNamespace(t, "git-")
	name := ns + "-0"
	repo := s.git.CreateRepo(name)
	repo.Commit("main", map[string]string{"Pulumi.yaml": s.revisionProgram("revision 0")})
	u, err := url.Parse(repo.URL)
	if err != nil {
		fatal(t, err)
	}
	host := newGate(t, u.Host)
	u.Host = host.addr
	if err := s.client.Create(context.Background(), s.stackOf(ns, name, u.String(), "v0", journal)); err != nil {
		fatal(t, err)
	}
	s.waitConverged(t, ns, 3*time.Minute, name)

	for i := 1; i <= s.params.GitOutages; i++ {
		host.Close()
		revision := fmt.Sprintf("revision %d", i)
		commit := repo.Commit("main", map[string]string{"Pulumi.yaml": s.revisionProgram(revision)})
		// A reconcile request makes the Stack read the branch now rather
		// than at its next poll, a minute away.
		s.requestReconcile(t, ns, name, fmt.Sprintf("outage-%d", i))
		var said string
		waitFor(t, time.Minute, "the Stack to report the unreachable repository", func() string {
			st := s.getStack(t, ns, name)
			c := condition(st, sreconcile.ReconcilingCondition)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "connection refused") {
				return "no Reconciling condition naming the refused connection: " + describe(st)
			}
			said = c.Reason + ": " + c.Message
			return ""
		})
		// The outage lasts a while longer; the Stack keeps saying so and
		// does not give up.
		down := time.Duration(rnd.Float64() * float64(10*time.Second))
		time.Sleep(down)
		st := s.getStack(t, ns, name)
		if c := condition(st, sreconcile.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
			errorf(t, "outage %d: the Stack stalled on an unreachable git host: %s", i, describe(st))
		}
		if c := condition(st, sreconcile.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue &&
			st.Status.LastUpdate != nil && st.Status.LastUpdate.LastSuccessfulCommit == commit {
			fatalf(t, "outage %d: the Stack deployed a commit it could not fetch: %s", i, describe(st))
		}
		t.Logf("outage %d: down %s more after the Stack said %q", i, fmtDuration(down), said)

		if err := host.Open(); err != nil {
			fatal(t, err)
		}
		back := time.Now()
		waitFor(t, 3*time.Minute, "the Stack to deploy the commit once git is back", func() string {
			st := s.getStack(t, ns, name)
			if why := converged(st); why != "" {
				return why
			}
			if got := st.Status.LastUpdate.LastSuccessfulCommit; got != commit {
				return fmt.Sprintf("deployed %s, not %s", got, commit)
			}
			return ""
		})
		t.Logf("outage %d: deployed %s after git came back", i, fmtDuration(time.Since(back)))
		if got := readFile(t, filepath.Join(s.outDir, name+"-static.txt")); got != revision {
			errorf(t, "outage %d: the file holds %q, want %q", i, got, revision)
		}
	}
	t.Logf("RESULT git-unreachable: outages=%d, each reported and recovered from without help", s.params.GitOutages)
}
