package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/test/testenv"
)

// testPromotionLeaderKilled runs two operator replicas with leader
// election instead of the suite's one, and a stage that auto-promotes
// every release of a pipeline to a Stack. For each of
// PromotionLeaderKills releases, the leader is killed (SIGKILL) at a
// random point of the release's promotion and started again as a
// standby. Each release must end with exactly one Promotion in the stage,
// Succeeded, the Stack at the release's commit, and the release's change
// written once.
func (s *suite) testPromotionLeaderKilled(t *testing.T) {
	rnd := seeded(t)
	ctx := context.Background()
	ns, journal := s.newNamespace(t, "promo-")
	name := ns + "-0"
	repo := s.git.CreateRepo(name)
	first := repo.Commit("main", map[string]string{"Pulumi.yaml": s.revisionProgram("r0")})

	// The replicas replace the suite's operator, which comes back after.
	if err := s.op.Stop(); err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() {
		if err := s.op.Start(); err != nil {
			errorf(t, "starting the suite's operator again: %v", err)
		}
	})
	replicas := []*testenv.Operator{s.replica(t), s.replica(t)}

	stack := s.stackOf(ns, name, repo.URL, "v0", journal)
	stack.Spec.GitSource.Branch, stack.Spec.GitSource.Commit = "", first
	stack.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "dev"}
	pipeline := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	// The test makes the releases, as the Pipeline would from a branch.
	pipeline.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repo.URL, Branch: "releases-are-made-by-the-test"}
	stage := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev"}}
	stage.Spec.Pipeline = "web"
	stage.Spec.Sources.Direct = true
	stage.Spec.Stacks = []promotionv1alpha1.StackBinding{{Name: name}}
	stage.Spec.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true}
	for _, obj := range []client.Object{stack, pipeline, stage} {
		if err := s.client.Create(ctx, obj); err != nil {
			fatalf(t, "creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	began := time.Now()
	s.waitConverged(t, ns, 3*time.Minute, name)
	// A promotion previews, pins the commit and updates: the kills fall
	// within the time the first update took, from the Promotion's
	// appearance.
	window := time.Since(began)
	for i := 1; i <= s.params.PromotionLeaderKills; i++ {
		revision := fmt.Sprintf("r%d", i)
		sha := repo.Commit("main", map[string]string{"Pulumi.yaml": s.revisionProgram(revision)})
		now := metav1.Now()
		release := &promotionv1alpha1.Release{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: revision, Labels: map[string]string{promotionv1alpha1.PipelineLabel: "web"}},
			Spec: promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{
				SHA: sha, Branch: "main", Subject: "release " + revision, Time: &now,
			}},
		}
		if err := s.client.Create(ctx, release); err != nil {
			fatal(t, err)
		}
		waitFor(t, 2*time.Minute, "the stage to promote "+revision, func() string {
			if len(s.promotionsOf(t, ns, revision)) == 0 {
				return "no Promotion of " + revision
			}
			return ""
		})
		delay := time.Duration(rnd.Float64() * float64(window))
		time.Sleep(delay)
		var leader int
		waitFor(t, time.Minute, "a leader", func() string {
			for j, r := range replicas {
				if v, err := r.Metric("leader_election_master_status"); err == nil && v == 1 {
					leader = j
					return ""
				}
			}
			return "no replica leads"
		})
		phase := "?"
		if ps := s.promotionsOf(t, ns, revision); len(ps) > 0 {
			phase = string(ps[0].Status.Phase)
		}
		if err := replicas[leader].Kill(); err != nil {
			fatal(t, err)
		}
		killed := time.Now()
		t.Logf("release %s: leader %c killed %s after its Promotion appeared, in phase %q", revision, 'a'+leader, fmtDuration(delay), phase)
		if err := replicas[leader].Start(); err != nil {
			fatal(t, err)
		}

		var done promotionv1alpha1.Promotion
		waitFor(t, 4*time.Minute, "the promotion of "+revision+" to finish", func() string {
			ps := s.promotionsOf(t, ns, revision)
			if len(ps) != 1 {
				return fmt.Sprintf("%d Promotions of %s", len(ps), revision)
			}
			if !ps[0].Status.Phase.IsFinished() {
				return fmt.Sprintf("Promotion %s is %s: %s", ps[0].Name, ps[0].Status.Phase, ps[0].Status.Message)
			}
			done = ps[0]
			return ""
		})
		if done.Status.Phase != promotionv1alpha1.PromotionSucceeded {
			errorf(t, "release %s: Promotion %s ended %s: %s", revision, done.Name, done.Status.Phase, done.Status.Message)
		}
		s.waitConverged(t, ns, 3*time.Minute, name)
		if got := s.getStack(t, ns, name).Status.LastUpdate.LastSuccessfulCommit; got != sha {
			errorf(t, "release %s: the Stack is at %s, want %s", revision, got, sha)
		}
		if got := readFile(t, filepath.Join(s.outDir, name+"-static.txt")); got != revision {
			errorf(t, "release %s: the file holds %q", revision, got)
		}
		t.Logf("release %s: Promotion %s %s %s after the kill", revision, done.Name, done.Status.Phase, fmtDuration(time.Since(killed)))
	}

	// Every release's change reached the file once.
	writes := map[string]int{}
	for _, e := range readJournal(t, journal) {
		if resourceName(e.URN) == "static" && e.Op != "delete" {
			v, _ := e.Inputs["content"].(string)
			writes[v]++
		}
	}
	for i := 0; i <= s.params.PromotionLeaderKills; i++ {
		if n := writes[fmt.Sprintf("r%d", i)]; n != 1 {
			errorf(t, "release r%d was written %d times", i, n)
		}
	}
	s.checkState(t, name)
	t.Logf("RESULT promotion-leader-killed: releases=%d, each promoted once and written once (%v)", s.params.PromotionLeaderKills, writes)
}

// replica starts an operator replica with leader election, with a state
// directory, log and metrics address of its own.
func (s *suite) replica(t *testing.T) *testenv.Operator {
	t.Helper()
	return testenv.StartOperator(t, testenv.OperatorOptions{
		Bin: s.bin, Dir: t.TempDir(), Config: s.opConfig,
		Args: []string{"--leader-elect", "--leader-election-namespace", operatorNamespace},
	})
}

// promotionsOf lists the Promotions of ns for release, not rollbacks.
func (s *suite) promotionsOf(t *testing.T, ns, release string) []promotionv1alpha1.Promotion {
	t.Helper()
	var list promotionv1alpha1.PromotionList
	if err := s.client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		fatal(t, err)
	}
	var out []promotionv1alpha1.Promotion
	for _, p := range list.Items {
		if p.Spec.Release == release && !p.Spec.Rollback {
			out = append(out, p)
		}
	}
	return out
}
