package stack

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/source"
)

// recordingPoller answers a fixed commit and records the maxAge of each
// query; zero means the branch was queried afresh.
type recordingPoller struct{ maxAges []time.Duration }

func (p *recordingPoller) Latest(_ context.Context, _, _ string, _ *source.GitAuth, maxAge time.Duration) (string, error) {
	p.maxAges = append(p.maxAges, maxAge)
	return "c0ffee", nil
}

// Key shares by repository and branch.
func (p *recordingPoller) Key(repo, branch string, _ *source.GitAuth) string {
	return repo + "#" + branch
}

// TestResolveGitFreshPollOncePerRequest checks that a new reconcile request
// (or a first update) queries the branch afresh exactly once, however many
// times the Stack is reconciled before its update starts (waiting on a
// prerequisite, say), and that the next request does it again.
func TestResolveGitFreshPollOncePerRequest(t *testing.T) {
	g := NewWithT(t)
	poller := &recordingPoller{}
	r := &Reconciler{Poller: poller, MinResync: time.Second}
	s := testStack(func(spec *shared.StackSpec) {
		spec.GitSource = &shared.GitSource{ProjectRepo: "https://git.invalid/web", Branch: "main"}
		spec.ResyncFrequencySeconds = 120
	})
	s.UID = "uid-1"
	resolve := func() {
		src, err := r.resolveGit(context.Background(), s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(src.Revision).To(Equal("c0ffee"))
	}

	// No update yet: the first look is fresh, the waits after it are not.
	resolve()
	resolve()
	resolve()
	g.Expect(poller.maxAges).To(Equal([]time.Duration{0, 2 * time.Minute, 2 * time.Minute}))

	// An update ran for no request; a new request looks afresh once.
	s.Status.LastUpdate = &shared.StackUpdateState{}
	s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "r1"}
	poller.maxAges = nil
	resolve()
	resolve()
	g.Expect(poller.maxAges).To(Equal([]time.Duration{0, 2 * time.Minute}))

	// Once the update for r1 ran, the cache serves; r2 is fresh again.
	s.Status.LastUpdate.ReconcileRequest = "r1"
	poller.maxAges = nil
	resolve()
	s.Annotations[shared.ReconcileRequestAnnotation] = "r2"
	resolve()
	g.Expect(poller.maxAges).To(Equal([]time.Duration{2 * time.Minute, 0}))
}
