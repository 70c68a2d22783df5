package change

import (
	"fmt"
	"slices"
	"strings"
	"time"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Availability is when a release is available to a stage, from its
// sources and the verifications recorded on the release.
type Availability struct {
	// Verified says the release is verified in enough upstream stages
	// (always, for a direct source); At is then when it is available,
	// its soak included.
	Verified bool
	// At is when the release is (or will be) available.
	At time.Time
	// SoakingIn is the upstream stage whose soak ends at At; empty for a
	// direct source or without a soak time.
	SoakingIn string
	// VerifiedIn and Missing are the upstream stages that have and have
	// not verified the release.
	VerifiedIn, Missing []string
}

// AvailableNow reports whether the release may be promoted at now.
func (a Availability) AvailableNow(now time.Time) bool { return a.Verified && !a.At.After(now) }

// Available computes when r is available to a stage fed by sources. A
// direct source makes every release of the pipeline available from its
// creation. From upstream stages, a release is available requiredSoakTime
// after its verification there: OneOf, after the first verification to
// soak; All, after the last.
func Available(sources *promotionv1alpha1.ReleaseSources, r *promotionv1alpha1.Release) Availability {
	var soak time.Duration
	if sources.RequiredSoakTime != nil {
		soak = sources.RequiredSoakTime.Duration
	}
	var a Availability
	for _, up := range sources.Stages {
		v, ok := r.Status.VerifiedIn[up]
		if !ok {
			a.Missing = append(a.Missing, up)
			continue
		}
		a.VerifiedIn = append(a.VerifiedIn, up)
		at := v.Since.Add(soak)
		all := sources.AvailabilityStrategy == promotionv1alpha1.All
		if a.At.IsZero() || (all && at.After(a.At)) || (!all && at.Before(a.At)) {
			a.At, a.SoakingIn = at, up
		}
	}
	if soak <= 0 {
		a.SoakingIn = ""
	}
	if len(sources.Stages) > 0 {
		a.Verified = len(a.VerifiedIn) > 0 && (sources.AvailabilityStrategy != promotionv1alpha1.All || len(a.Missing) == 0)
	}
	if sources.Direct {
		a = Availability{Verified: true, At: r.CreationTimestamp.Time}
	}
	return a
}

// CompareReleases orders releases from the oldest to the newest: by commit
// time (creation when the commit has none), then creation, then name.
func CompareReleases(a, b *promotionv1alpha1.Release) int {
	if c := releaseTime(a).Compare(releaseTime(b)); c != 0 {
		return c
	}
	return CompareAge(a, b)
}

func releaseTime(r *promotionv1alpha1.Release) time.Time {
	if t := r.Spec.Commit.Time; t != nil {
		return t.Time
	}
	return r.CreationTimestamp.Time
}

// Selection is the release a stage would promote next, or why there is
// none.
type Selection struct {
	// Release is the release to promote; nil when none is.
	Release *promotionv1alpha1.Release
	// Waiting says what keeps the next release from being available; empty
	// when Release is set or the stage runs what it would pick.
	Waiting string
	// WakeAt, when set, is when a soak ends and the answer may change.
	WakeAt time.Time
}

// Select picks the release stage should run next from releases (those of
// its pipeline), at now, by its auto-promotion selection policy, whether
// auto-promotion is on or not (without it the pick is what a person would
// be asked to promote). current is the release the stage runs ("" for
// none). Releases that failed in the stage are never picked.
//
//   - NewestRelease: the newest available release (CompareReleases) newer
//     than every release verified in the stage, so that the stage never
//     goes back by itself.
//   - MatchUpstream: the release the single upstream stage runs, once
//     available.
func Select(stage *promotionv1alpha1.Stage, releases []promotionv1alpha1.Release, current string, now time.Time) Selection {
	if len(releases) == 0 {
		return Selection{Waiting: "no release yet"}
	}
	if selectionPolicy(stage) == promotionv1alpha1.MatchUpstream {
		return matchUpstream(stage, releases, current, now)
	}
	var highWater *promotionv1alpha1.Release
	for i := range releases {
		r := &releases[i]
		if _, verified := r.Status.VerifiedIn[stage.Name]; (verified || r.Name == current) && (highWater == nil || CompareReleases(r, highWater) > 0) {
			highWater = r
		}
	}
	var candidates []*promotionv1alpha1.Release
	var failed *promotionv1alpha1.Release
	for i := range releases {
		r := &releases[i]
		if r.Name == current || (highWater != nil && CompareReleases(r, highWater) <= 0) {
			continue
		}
		if _, bad := r.Status.FailedIn[stage.Name]; bad {
			if failed == nil || CompareReleases(r, failed) > 0 {
				failed = r
			}
			continue
		}
		candidates = append(candidates, r)
	}
	slices.SortFunc(candidates, func(a, b *promotionv1alpha1.Release) int { return CompareReleases(b, a) })
	// Say why about the candidate closest to being available: the first
	// to end its soak, else the newest verified in the most upstream
	// stages.
	var sel Selection
	soaking, verifiedIn := false, -1
	for _, r := range candidates {
		a := Available(&stage.Spec.Sources, r)
		if a.AvailableNow(now) {
			return Selection{Release: r, WakeAt: sel.WakeAt}
		}
		switch {
		case a.Verified:
			if sel.WakeAt.IsZero() || a.At.Before(sel.WakeAt) {
				sel.WakeAt, sel.Waiting, soaking = a.At, waitingFor(stage, r, a), true
			}
		case !soaking && len(a.VerifiedIn) > verifiedIn:
			sel.Waiting, verifiedIn = waitingFor(stage, r, a), len(a.VerifiedIn)
		}
	}
	if sel.Waiting == "" && failed != nil {
		sel.Waiting = fmt.Sprintf("release %s failed in %s; it is not promoted automatically again", failed.Name, stage.Name)
	}
	return sel
}

// matchUpstream is Select for MatchUpstream.
func matchUpstream(stage *promotionv1alpha1.Stage, releases []promotionv1alpha1.Release, current string, now time.Time) Selection {
	up := ""
	if len(stage.Spec.Sources.Stages) > 0 {
		up = stage.Spec.Sources.Stages[0]
	}
	var runs *promotionv1alpha1.Release
	for i := range releases {
		if _, ok := releases[i].Status.CurrentlyIn[up]; ok && (runs == nil || CompareReleases(&releases[i], runs) > 0) {
			runs = &releases[i]
		}
	}
	switch {
	case runs == nil:
		return Selection{Waiting: fmt.Sprintf("stage %s runs no release yet", up)}
	case runs.Name == current:
		return Selection{}
	}
	if _, bad := runs.Status.FailedIn[stage.Name]; bad {
		return Selection{Waiting: fmt.Sprintf("release %s failed in %s; it is not promoted automatically again", runs.Name, stage.Name)}
	}
	a := Available(&stage.Spec.Sources, runs)
	if a.AvailableNow(now) {
		return Selection{Release: runs}
	}
	sel := Selection{Waiting: waitingFor(stage, runs, a)}
	if a.Verified {
		sel.WakeAt = a.At
	}
	return sel
}

// waitingFor says why r, the best candidate, is not available yet.
func waitingFor(stage *promotionv1alpha1.Stage, r *promotionv1alpha1.Release, a Availability) string {
	if a.Verified {
		return fmt.Sprintf("release %s: soaking in %s until %s", r.Name, a.SoakingIn, a.At.UTC().Format(time.RFC3339))
	}
	ups := stage.Spec.Sources.Stages
	if len(a.VerifiedIn) > 0 {
		return fmt.Sprintf("release %s: verified in %s, waiting for %s", r.Name, strings.Join(a.VerifiedIn, ", "), strings.Join(a.Missing, " and "))
	}
	join := " or "
	if stage.Spec.Sources.AvailabilityStrategy == promotionv1alpha1.All {
		join = " and "
	}
	if len(ups) == 2 && join == " and " {
		return fmt.Sprintf("no release verified in both %s and %s", ups[0], ups[1])
	}
	return fmt.Sprintf("no release verified in %s", strings.Join(ups, join))
}

// selectionPolicy is the stage's selection policy, NewestRelease by default.
func selectionPolicy(stage *promotionv1alpha1.Stage) promotionv1alpha1.SelectionPolicy {
	if o := stage.Spec.AutoPromotionOptions; o != nil && o.SelectionPolicy != "" {
		return o.SelectionPolicy
	}
	return promotionv1alpha1.NewestRelease
}
