package promotion

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonWavePause is the reason of the wait of a rollout between two
// waves (spec.rollout.pauseBetweenWaves).
const ReasonWavePause = "WavePause"

// rolloutOf is the stage's rollout (nil without one, or once the stage is
// gone), as the stage says now: what a promotion that starts follows.
func (s *session) rolloutOf() *promotionv1alpha1.Rollout {
	if s.stage == nil {
		return nil
	}
	return s.stage.Spec.Rollout
}

// recordedRollout is the rollout a running promotion follows: the stage's
// spec.rollout as it was when the promotion started (status.rollout.spec),
// or nil for a stage that had none. A governor who changes the stage
// changes the next promotion, not this one.
func (s *session) recordedRollout() *promotionv1alpha1.Rollout {
	if ro := s.p.Status.Rollout; ro != nil {
		return ro.Spec
	}
	return nil
}

// planRollout orders the Stacks a promotion starts with and assigns each
// its wave (change.Waves), all Pending; with a rollout on the stage it
// also records status.rollout: the waves, the failure budget computed for
// this many Stacks, and the first wave's start.
func (s *session) planRollout(stacks []promotionv1alpha1.PromotedStack, labels map[string]map[string]string) ([]promotionv1alpha1.PromotedStack, error) {
	rollout := s.rolloutOf()
	members := make([]change.RolloutMember, len(stacks))
	for i, ps := range stacks {
		members[i] = change.RolloutMember{Name: ps.Name, Labels: labels[ps.Name]}
	}
	waveOf, waves, err := change.Waves(rollout, s.p.Spec.Stage, members)
	if err != nil {
		return nil, err
	}
	budget, err := change.FailureBudget(rollout, len(stacks))
	if err != nil {
		return nil, err
	}
	byName := make(map[string]promotionv1alpha1.PromotedStack, len(stacks))
	for _, ps := range stacks {
		byName[ps.Name] = ps
	}
	ordered := make([]promotionv1alpha1.PromotedStack, 0, len(stacks))
	for _, m := range change.Order(rollout, s.p.Spec.Stage, members) {
		ps := byName[m.Name]
		ps.State = promotionv1alpha1.StackPending
		if rollout != nil {
			ps.Wave = waveOf[m.Name]
		}
		ordered = append(ordered, ps)
	}
	// change.Waves numbers the waves along this same order, so the list
	// goes wave by wave.
	if rollout != nil {
		now := metav1.NewTime(s.now)
		s.p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Spec: rollout.DeepCopy(), Waves: waves, Wave: 1, WaveStartTime: &now, FailureBudget: budget}
		if rollout.ApproveEachWave && s.stage.Spec.Approval != nil {
			s.p.Status.Rollout.ApprovalPolicy = s.stage.Spec.Approval.DeepCopy()
		}
	}
	return ordered, nil
}

// wave is the wave of a promoted Stack: 1 without a rollout.
func wave(ps *promotionv1alpha1.PromotedStack) int32 { return max(ps.Wave, 1) }

// pinned reports whether the rollout has reached the Stack (its record
// says so before pinStacks pins it), and so observeStacks follows it.
func pinned(ps *promotionv1alpha1.PromotedStack) bool {
	switch ps.State {
	case promotionv1alpha1.StackUpdating, promotionv1alpha1.StackSucceeded, promotionv1alpha1.StackFailed:
		return true
	case "":
		// Recorded before rollouts had states: every Stack was pinned.
		return true
	}
	return false
}

// maxHalts is the most halts status.rollout records.
const maxHalts = 16

// haltCause is what halted a rollout, as the halts metric counts it.
type haltCause string

const (
	// haltBudget: more Stacks failed than the failure budget allows.
	haltBudget haltCause = "budget"
	// haltVerification: a check of a wave failed (verifyEachWave).
	haltVerification haltCause = "verification"
	// haltPerson: an Intervention.
	haltPerson haltCause = "person"
)

// halt halts the rollout for why (by whom, when a person did): it pins
// no more Stacks until resumed. The halt is recorded in status.rollout
// (halted, and the halts) and told by a Warning event, which Alerts send
// as RolloutHalted.
func (s *session) halt(cause haltCause, why, by string) {
	ro := s.ensureRolloutStatus()
	ro.Halted = sreconcile.Truncate(why, 1024)
	if len(ro.Halts) < maxHalts {
		ro.Halts = append(ro.Halts, promotionv1alpha1.RolloutHalt{Time: metav1.NewTime(s.now), Reason: ro.Halted, By: by})
	}
	s.obs.halts = append(s.obs.halts, cause)
	s.event(corev1.EventTypeWarning, promotionv1alpha1.EventRolloutHalted,
		fmt.Sprintf("rollout of release %s into stage %s halted: %s", s.p.Spec.Release, s.p.Spec.Stage, ro.Halted))
}

// haltedWait is the wait of a halted promotion: it says where the
// rollout stopped (a promotion into a stage without waves, halted by a
// person, has no waves to name), why, and where the Stacks are.
func (s *session) haltedWait() error {
	ro := s.p.Status.Rollout
	where := "halted"
	if ro.Spec != nil {
		where = fmt.Sprintf("rollout halted in wave %d of %d", ro.Wave, ro.Waves)
	}
	return sreconcile.NewWaiting(promotionv1alpha1.PromotionReasonHalted,
		fmt.Errorf("%s: %s; %s", where, ro.Halted, describeCounts(countStates(s.p.Status.Stacks))), deployWait)
}

// advanceRollout decides, once observeStacks has updated each pinned
// Stack's state, what the rollout does next, in this order:
//
//   - aborted: the Stacks not reached are Skipped, and once none updates
//     the promotion ends Aborted, naming what each Stack runs (an abort
//     that came when every Stack was reached changes nothing);
//   - no Stack pending or updating: the promotion succeeds (verify runs
//     the stage's checks next), naming the Stacks that failed within the
//     budget; or, with more failures than the budget, fails;
//   - more Stacks failed than the failure budget allows: it halts (a
//     Warning event), and a halted rollout pins nothing and waits;
//   - otherwise it marks the next Stacks of the waves begun Updating, at
//     most maxParallel at once, and requeues, so that the marks are stored
//     before pinStacks pins them; once a wave has finished it runs the
//     stage's checks against it (verifyEachWave: verifyWave), waits
//     pauseBetweenWaves, waits for the next wave's approvals
//     (approveEachWave: approveWave) and begins the next.
//
// It follows the rollout recorded when the promotion started
// (recordedRollout). Without one there is one wave of every Stack, and
// observeStacks has already failed the promotion at the first failure.
func (s *session) advanceRollout(ctx context.Context) (sreconcile.Result, error) {
	if !s.running() || s.outcome != "" {
		return sreconcile.ResultEmpty, nil
	}
	st := &s.p.Status
	rollout := s.recordedRollout()
	ro := st.Rollout
	counts := countStates(st.Stacks)
	defer func() {
		if ro := st.Rollout; ro != nil {
			ro.Counts = countStates(st.Stacks)
		}
	}()
	if rec, ok := s.aborting(); ok {
		for i := range st.Stacks {
			if st.Stacks[i].State == promotionv1alpha1.StackPending {
				st.Stacks[i].State = promotionv1alpha1.StackSkipped
			}
		}
		counts = countStates(st.Stacks)
		if counts.Updating > 0 {
			s.wait = sreconcile.NewWaiting(ReasonDeploying,
				fmt.Errorf("aborted by %s; waiting for %s updating to finish: %s", rec.User, stacksRun(int(counts.Updating), ""), s.waiting), deployWait)
			return sreconcile.ResultEmpty, nil
		}
		if counts.Skipped > 0 {
			s.outcome, s.message = promotionv1alpha1.PromotionAborted, fmt.Sprintf("aborted by %s%s: %s", rec.User, reasonSuffix(rec.Reason), s.whereStacksAre())
			return sreconcile.ResultEmpty, nil
		}
	}
	if counts.Pending == 0 && counts.Updating == 0 && counts.Skipped == 0 {
		commit := change.ShortCommit(st.Commit)
		switch {
		case counts.Failed == 0:
			s.outcome, s.message = promotionv1alpha1.PromotionSucceeded, fmt.Sprintf("every Stack is Ready at %s", commit)
		case rollout != nil && counts.Failed <= ro.FailureBudget:
			s.outcome, s.message = promotionv1alpha1.PromotionSucceeded, fmt.Sprintf("every Stack but %d is Ready at %s, within the failure budget of %d: %s",
				counts.Failed, commit, ro.FailureBudget, s.failedStacks())
		default:
			// Failed because the release failed on a Stack, not only
			// because Stacks were deleted or held changes.
			s.outcome, s.releaseFailed = promotionv1alpha1.PromotionFailed, s.releaseFaults > 0
			s.message = fmt.Sprintf("%s, more than the failure budget of %d: %s", stacksRun(int(counts.Failed), "failed"), ro.FailureBudget, s.failedStacks())
		}
		return sreconcile.ResultEmpty, nil
	}
	if rollout != nil && counts.Failed > ro.FailureBudget && ro.Halted == "" {
		s.halt(haltBudget, fmt.Sprintf("the failure budget is spent: %s, the budget is %d (%s)",
			stacksRun(int(counts.Failed), "failed"), ro.FailureBudget, s.failedStacks()), "")
	}
	if ro != nil && ro.Halted != "" {
		// Woken by an Intervention or a Stack; the wait only looks again.
		s.wait = s.haltedWait()
		return sreconcile.ResultEmpty, nil
	}
	current := int32(1)
	if rollout != nil {
		current = max(ro.Wave, 1)
	}
	waveDone := true
	for i := range st.Stacks {
		ps := &st.Stacks[i]
		if wave(ps) <= current && (ps.State == promotionv1alpha1.StackPending || ps.State == promotionv1alpha1.StackUpdating) {
			waveDone = false
		}
	}
	if waveDone && rollout != nil && current < ro.Waves {
		if rollout.VerifyEachWave {
			if passed, err := s.verifyWave(ctx, current); err != nil || !passed {
				return sreconcile.ResultEmpty, err
			}
		}
		if pause := pauseOf(rollout); pause > 0 {
			if ro.NextWaveTime == nil {
				t := metav1.NewTime(s.now.Add(pause).Truncate(time.Second))
				ro.NextWaveTime = &t
			}
			if next := ro.NextWaveTime.Time; s.now.Before(next) {
				s.wait = sreconcile.NewWaiting(ReasonWavePause,
					fmt.Errorf("wave %d of %d deployed; the next begins at %s; %s", current, ro.Waves, next.UTC().Format(time.RFC3339), describeCounts(counts)),
					next.Sub(s.now))
				return sreconcile.ResultEmpty, nil
			}
		}
		if rollout.ApproveEachWave {
			if approved, err := s.approveWave(ctx, current+1); err != nil || !approved {
				return sreconcile.ResultEmpty, err
			}
		}
		current++
		now := metav1.NewTime(s.now)
		ro.Wave, ro.WaveStartTime, ro.NextWaveTime = current, &now, nil
		s.event(corev1.EventTypeNormal, promotionv1alpha1.EventWaveStarted, fmt.Sprintf("rollout of release %s into stage %s: wave %d of %d began", s.p.Spec.Release, s.p.Spec.Stage, current, ro.Waves))
	}
	// Mark the next Stacks of the waves begun, in the rollout's order, at
	// most maxParallel updating at once.
	limit := int32(len(st.Stacks)) //nolint:gosec // bounded by the API's MaxItems on status.stacks
	if rollout != nil && rollout.MaxParallel > 0 {
		limit = rollout.MaxParallel
	}
	updating, marked := counts.Updating, false
	for i := range st.Stacks {
		ps := &st.Stacks[i]
		if updating >= limit {
			break
		}
		if ps.State == promotionv1alpha1.StackPending && wave(ps) <= current {
			ps.State, marked = promotionv1alpha1.StackUpdating, true
			updating++
		}
	}
	if marked {
		// Stored first: a Stack is pinned only once the record says it
		// is reached, so no reconcile killed in between leaves a pin the
		// record does not know.
		return sreconcile.ResultRequeue, nil
	}
	waiting := s.waiting
	if waiting == "" {
		waiting = "pinning the Stacks"
	}
	if rollout != nil {
		waiting = fmt.Sprintf("wave %d of %d: %s; %s", ro.Wave, ro.Waves, describeCounts(countStates(st.Stacks)), waiting)
	}
	s.wait = sreconcile.NewWaiting(ReasonDeploying, fmt.Errorf("%s", waiting), deployWait)
	return sreconcile.ResultEmpty, nil
}

// awaitRollout returns the wait advanceRollout decided, once pinStacks has
// applied again the pins of the Stacks the rollout reached (a pin someone
// removed is put back even while the rollout waits).
func (s *session) awaitRollout(_ context.Context) (sreconcile.Result, error) {
	if !s.running() || s.outcome != "" || s.wait == nil {
		return sreconcile.ResultEmpty, nil
	}
	return sreconcile.ResultEmpty, s.wait
}

// pauseOf is the rollout's pause between waves.
func pauseOf(rollout *promotionv1alpha1.Rollout) time.Duration {
	if rollout == nil || rollout.PauseBetweenWaves == nil {
		return 0
	}
	return rollout.PauseBetweenWaves.Duration
}

// countStates counts promoted Stacks by state.
func countStates(stacks []promotionv1alpha1.PromotedStack) promotionv1alpha1.RolloutCounts {
	var c promotionv1alpha1.RolloutCounts
	for i := range stacks {
		c.Add(stacks[i].State)
	}
	return c
}

// describeCounts says how many Stacks are in each state.
func describeCounts(c promotionv1alpha1.RolloutCounts) string {
	return fmt.Sprintf("%d succeeded, %d failed, %d updating, %d pending, %d skipped", c.Succeeded, c.Failed, c.Updating, c.Pending, c.Skipped)
}

// failedStacks names the failed Stacks, at most 5, with how many more.
func (s *session) failedStacks() string {
	var names []string
	for _, ps := range s.p.Status.Stacks {
		if ps.State == promotionv1alpha1.StackFailed {
			names = append(names, ps.Name)
		}
	}
	return listSome(names, 5)
}

// listSome joins at most n names, and says how many more there are.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// whereStacksAre says, after an abort, which release each Stack runs:
// those that succeeded run the release, those never pinned run what they
// ran before (the release the stage runs, where their previous commit is
// its commit), and those that failed are at the release's commit with a
// failed update.
func (s *session) whereStacksAre() string {
	var at, before, failed []string
	for _, ps := range s.p.Status.Stacks {
		switch ps.State {
		case promotionv1alpha1.StackSucceeded:
			at = append(at, ps.Name)
		case promotionv1alpha1.StackFailed:
			failed = append(failed, ps.Name)
		default:
			before = append(before, ps.Name)
		}
	}
	var parts []string
	if len(at) > 0 {
		parts = append(parts, fmt.Sprintf("%s release %s (%s): %s", stacksRun(len(at), "run"), s.p.Spec.Release, change.ShortCommit(s.p.Status.Commit), listSome(at, 5)))
	}
	if len(before) > 0 {
		was := "the commits they ran before"
		if cur := s.stageRelease(); cur != nil && s.allPreviousAt(before, cur.SHA) {
			was = fmt.Sprintf("release %s (%s), as before", cur.Name, change.ShortCommit(cur.SHA))
		}
		parts = append(parts, fmt.Sprintf("%s %s: %s", stacksRun(len(before), "run"), was, listSome(before, 5)))
	}
	if len(failed) > 0 {
		parts = append(parts, fmt.Sprintf("%s to update to %s: %s", stacksRun(len(failed), "failed"), change.ShortCommit(s.p.Status.Commit), listSome(failed, 5)))
	}
	return strings.Join(parts, "; ")
}

// stacksRun is "1 Stack runs" or "n Stacks run": n Stacks and the verb,
// in the present tense made to agree ("run"), or as given ("failed").
func stacksRun(n int, verb string) string {
	noun := "Stacks"
	if n == 1 {
		noun = "Stack"
		if verb == "run" {
			verb = "runs"
		}
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s %s", n, noun, verb))
}

// stageRelease is the release the stage's status says it runs.
func (s *session) stageRelease() *promotionv1alpha1.StageRelease {
	if s.stage == nil {
		return nil
	}
	return s.stage.Status.CurrentRelease
}

// allPreviousAt reports whether each named Stack's previous commit is sha.
func (s *session) allPreviousAt(names []string, sha string) bool {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for _, ps := range s.p.Status.Stacks {
		if want[ps.Name] && ps.PreviousCommit != sha {
			return false
		}
	}
	return true
}

// reasonSuffix is ": reason", or "" without one.
func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
