package change

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

// release is a Release committed at t0+commit, verified in the stages
// listed in verified (stage → since, as an offset from t0).
func release(name string, commit time.Duration, verified map[string]time.Duration) promotionv1alpha1.Release {
	r := promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(commit)},
		Spec:       promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{SHA: name, Time: ptr(at(commit))}},
	}
	for stage, since := range verified {
		if r.Status.VerifiedIn == nil {
			r.Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{}
		}
		r.Status.VerifiedIn[stage] = promotionv1alpha1.ReleaseInStage{Since: at(since)}
	}
	return r
}

func ptr[T any](v T) *T { return &v }

func TestAvailable(t *testing.T) {
	soak := &metav1.Duration{Duration: time.Hour}
	r := release("r1", 0, map[string]time.Duration{"dev": 10 * time.Minute, "dev2": 30 * time.Minute})
	partial := release("r2", 0, map[string]time.Duration{"dev": 10 * time.Minute})
	tests := []struct {
		name      string
		sources   promotionv1alpha1.ReleaseSources
		release   promotionv1alpha1.Release
		verified  bool
		at        time.Duration
		soakingIn string
		missing   []string
	}{
		{name: "direct: available when discovered", sources: promotionv1alpha1.ReleaseSources{Direct: true}, release: r, verified: true},
		{name: "OneOf, no soak: the first verification", sources: promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}}, release: r, verified: true, at: 10 * time.Minute},
		{name: "OneOf with soak: the first to soak", sources: promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}, RequiredSoakTime: soak},
			release: r, verified: true, at: 70 * time.Minute, soakingIn: "dev"},
		{name: "All with soak: the last to soak", sources: promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}, AvailabilityStrategy: promotionv1alpha1.All, RequiredSoakTime: soak},
			release: r, verified: true, at: 90 * time.Minute, soakingIn: "dev2"},
		{name: "All, verified in one", sources: promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}, AvailabilityStrategy: promotionv1alpha1.All},
			release: partial, at: 10 * time.Minute, missing: []string{"dev2"}},
		{name: "OneOf, verified in one", sources: promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}}, release: partial, verified: true, at: 10 * time.Minute, missing: []string{"dev2"}},
		{name: "verified nowhere", sources: promotionv1alpha1.ReleaseSources{Stages: []string{"qa"}}, release: partial, missing: []string{"qa"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Available(&tt.sources, &tt.release)
			if a.Verified != tt.verified {
				t.Errorf("Verified = %v, want %v", a.Verified, tt.verified)
			}
			if tt.verified && !a.At.Equal(t0.Add(tt.at)) {
				t.Errorf("At = %s, want t0+%s", a.At, tt.at)
			}
			if a.SoakingIn != tt.soakingIn {
				t.Errorf("SoakingIn = %q, want %q", a.SoakingIn, tt.soakingIn)
			}
			if strings.Join(a.Missing, ",") != strings.Join(tt.missing, ",") {
				t.Errorf("Missing = %v, want %v", a.Missing, tt.missing)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	qa := func(mutate func(*promotionv1alpha1.Stage)) *promotionv1alpha1.Stage {
		st := &promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Name: "qa"},
			Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Sources: promotionv1alpha1.ReleaseSources{
				Stages: []string{"dev", "dev2"}, AvailabilityStrategy: promotionv1alpha1.All, RequiredSoakTime: &metav1.Duration{Duration: time.Hour},
			}},
		}
		if mutate != nil {
			mutate(st)
		}
		return st
	}
	failedIn := func(r promotionv1alpha1.Release, stage string) promotionv1alpha1.Release {
		r.Status.FailedIn = map[string]promotionv1alpha1.ReleaseInStage{stage: {Since: at(0)}}
		return r
	}
	currentlyIn := func(r promotionv1alpha1.Release, stage string) promotionv1alpha1.Release {
		r.Status.CurrentlyIn = map[string]promotionv1alpha1.ReleaseInStage{stage: {Since: at(0)}}
		return r
	}
	both := map[string]time.Duration{"dev": 0, "dev2": 20 * time.Minute}
	tests := []struct {
		name     string
		stage    *promotionv1alpha1.Stage
		releases []promotionv1alpha1.Release
		current  string
		now      time.Duration
		want     string // the release picked
		waiting  string // a substring of Waiting
		wakeAt   time.Duration
	}{
		{name: "no releases", stage: qa(nil), waiting: "no release yet"},
		{name: "nothing verified", stage: qa(nil), releases: []promotionv1alpha1.Release{release("r1", 0, nil)},
			waiting: "no release verified in both dev and dev2"},
		{name: "verified in one of two", stage: qa(nil), releases: []promotionv1alpha1.Release{release("r1", 0, map[string]time.Duration{"dev": 0})},
			waiting: "release r1: verified in dev, waiting for dev2"},
		{name: "soaking", stage: qa(nil), releases: []promotionv1alpha1.Release{release("r1", 0, both)}, now: 30 * time.Minute,
			waiting: "release r1: soaking in dev2 until 2026-03-02T10:20:00Z", wakeAt: 80 * time.Minute},
		{name: "soaked", stage: qa(nil), releases: []promotionv1alpha1.Release{release("r1", 0, both)}, now: 80 * time.Minute, want: "r1"},
		{name: "the newest available, a newer one soaking", stage: qa(nil), now: 90 * time.Minute,
			releases: []promotionv1alpha1.Release{release("r1", 0, both), release("r2", time.Minute, map[string]time.Duration{"dev": time.Hour, "dev2": time.Hour})},
			want:     "r1", wakeAt: 2 * time.Hour},
		{name: "runs the newest", stage: qa(nil), now: 3 * time.Hour, current: "r2",
			releases: []promotionv1alpha1.Release{release("r1", 0, both), release("r2", time.Minute, both)}},
		{name: "never back to an older release", stage: qa(nil), now: 3 * time.Hour, current: "r1",
			releases: []promotionv1alpha1.Release{release("r1", 0, both), release("r2", time.Minute, map[string]time.Duration{"dev": 0, "dev2": 0, "qa": time.Hour})}},
		{name: "a failed release stays out", stage: qa(nil), now: 3 * time.Hour, current: "r1",
			releases: []promotionv1alpha1.Release{release("r1", 0, both), failedIn(release("r2", time.Minute, both), "qa")},
			waiting:  "release r2 failed in qa"},
		{name: "an older release when the newer failed", stage: qa(nil), now: 3 * time.Hour,
			releases: []promotionv1alpha1.Release{release("r1", 0, both), failedIn(release("r2", time.Minute, both), "qa")}, want: "r1"},
		{name: "MatchUpstream follows the upstream back", now: 3 * time.Hour, current: "r2",
			stage: qa(func(st *promotionv1alpha1.Stage) {
				st.Spec.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}}
				st.Spec.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true, SelectionPolicy: promotionv1alpha1.MatchUpstream}
			}),
			releases: []promotionv1alpha1.Release{currentlyIn(release("r1", 0, both), "dev"), release("r2", time.Minute, both)}, want: "r1"},
		{name: "MatchUpstream, upstream runs nothing", now: 3 * time.Hour,
			stage: qa(func(st *promotionv1alpha1.Stage) {
				st.Spec.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}}
				st.Spec.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true, SelectionPolicy: promotionv1alpha1.MatchUpstream}
			}),
			releases: []promotionv1alpha1.Release{release("r1", 0, both)}, waiting: "stage dev runs no release yet"},
		{name: "direct: the newest", now: time.Hour,
			stage:    qa(func(st *promotionv1alpha1.Stage) { st.Spec.Sources = promotionv1alpha1.ReleaseSources{Direct: true} }),
			releases: []promotionv1alpha1.Release{release("r1", 0, nil), release("r2", time.Minute, nil)}, want: "r2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := Select(tt.stage, tt.releases, tt.current, t0.Add(tt.now))
			got := ""
			if sel.Release != nil {
				got = sel.Release.Name
			}
			if got != tt.want {
				t.Errorf("picked %q, want %q (waiting %q)", got, tt.want, sel.Waiting)
			}
			if !strings.Contains(sel.Waiting, tt.waiting) || (tt.waiting == "" && sel.Waiting != "") {
				t.Errorf("Waiting = %q, want %q", sel.Waiting, tt.waiting)
			}
			var wantWake time.Time
			if tt.wakeAt != 0 {
				wantWake = t0.Add(tt.wakeAt)
			}
			if !sel.WakeAt.Equal(wantWake) {
				t.Errorf("WakeAt = %s, want %s", sel.WakeAt, wantWake)
			}
		})
	}
}
