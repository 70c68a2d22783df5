package pipeline

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func TestPrunable(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(h) * time.Hour)) }
	// r1 … r6, r6 the newest commit.
	releases := func(mutate func(map[string]*promotionv1alpha1.Release)) []promotionv1alpha1.Release {
		var out []promotionv1alpha1.Release
		byName := map[string]*promotionv1alpha1.Release{}
		for i := 1; i <= 6; i++ {
			ct := at(i)
			out = append(out, promotionv1alpha1.Release{
				ObjectMeta: metav1.ObjectMeta{Name: "r" + string(rune('0'+i)), CreationTimestamp: at(10)},
				Spec:       promotionv1alpha1.ReleaseSpec{Commit: promotionv1alpha1.ReleaseCommit{Time: &ct}},
			})
		}
		for i := range out {
			byName[out[i].Name] = &out[i]
		}
		if mutate != nil {
			mutate(byName)
		}
		return out
	}
	in := func(since int) promotionv1alpha1.ReleaseInStage {
		return promotionv1alpha1.ReleaseInStage{Since: at(since)}
	}
	promotion := func(release string, phase promotionv1alpha1.PromotionPhase) promotionv1alpha1.Promotion {
		return promotionv1alpha1.Promotion{Spec: promotionv1alpha1.PromotionSpec{Release: release}, Status: promotionv1alpha1.PromotionStatus{Phase: phase}}
	}
	tests := []struct {
		name       string
		releases   []promotionv1alpha1.Release
		promotions []promotionv1alpha1.Promotion
		latest     string
		keep       int
		want       []string
	}{
		{name: "within the retention", releases: releases(nil), keep: 6},
		{name: "the oldest go", releases: releases(nil), keep: 3, want: []string{"r3", "r2", "r1"}},
		{name: "the latest stays", releases: releases(nil), latest: "r1", keep: 4, want: []string{"r2"}},
		{name: "a release a stage runs stays", keep: 3, want: []string{"r3", "r1"},
			releases: releases(func(m map[string]*promotionv1alpha1.Release) {
				m["r2"].Status.CurrentlyIn = map[string]promotionv1alpha1.ReleaseInStage{"prod": in(20)}
			})},
		{name: "releases unfinished promotions name stay", releases: releases(nil), keep: 3, want: []string{"r2"},
			promotions: []promotionv1alpha1.Promotion{
				promotion("r1", promotionv1alpha1.PromotionPending), promotion("r3", promotionv1alpha1.PromotionRunning),
				promotion("r2", promotionv1alpha1.PromotionSucceeded), promotion("r2", promotionv1alpha1.PromotionAborted),
			}},
		{name: "a promotion not picked up yet counts as pending", releases: releases(nil), keep: 5, want: nil,
			promotions: []promotionv1alpha1.Promotion{promotion("r1", "")}},
		{name: "the rollback target of each stage stays", keep: 2, want: []string{"r4", "r2"},
			releases: releases(func(m map[string]*promotionv1alpha1.Release) {
				// prod runs r6 (verified); r3 is its newest other verified
				// release, r1 an older one.
				m["r6"].Status.CurrentlyIn = map[string]promotionv1alpha1.ReleaseInStage{"prod": in(30)}
				m["r6"].Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{"prod": in(31)}
				m["r3"].Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{"prod": in(20)}
				m["r1"].Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{"prod": in(10), "dev": in(11)}
				// dev's newest verified release is r1 (r4 failed there).
				m["r4"].Status.FailedIn = map[string]promotionv1alpha1.ReleaseInStage{"dev": in(12)}
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, rel := range prunable(tt.releases, tt.promotions, tt.latest, tt.keep) {
				got = append(got, rel.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("prunable = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPrunableOrder(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(t0.Add(time.Second))
	// Same commit time: the later created is the newer.
	releases := []promotionv1alpha1.Release{
		{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: later}, Spec: promotionv1alpha1.ReleaseSpec{Commit: promotionv1alpha1.ReleaseCommit{Time: &t0}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: t0}, Spec: promotionv1alpha1.ReleaseSpec{Commit: promotionv1alpha1.ReleaseCommit{Time: &t0}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "timeless", CreationTimestamp: later}},
	}
	got := prunable(releases, nil, "", 1)
	if len(got) != 2 || got[0].Name != "old" || got[1].Name != "timeless" {
		t.Errorf("prunable = %v, want old, then timeless", got)
	}
}
