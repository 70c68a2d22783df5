package change

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func fleet(n int) []RolloutMember {
	out := make([]RolloutMember, n)
	for i := range out {
		out[i] = RolloutMember{Name: fmt.Sprintf("s%02d", i)}
	}
	return out
}

// sizes are how many Stacks each wave holds.
func sizes(waveOf map[string]int32, waves int32) []int {
	out := make([]int, waves)
	for _, w := range waveOf {
		out[w-1]++
	}
	return out
}

func TestWaves(t *testing.T) {
	w := func(vs ...string) *promotionv1alpha1.Rollout {
		r := &promotionv1alpha1.Rollout{}
		for _, v := range vs {
			r.Waves = append(r.Waves, intstr.Parse(v))
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		rollout *promotionv1alpha1.Rollout
		n       int
		want    []int
		wantErr string
	}{
		{"no rollout: one wave", nil, 5, []int{5}, ""},
		{"no waves: one wave", w(), 5, []int{5}, ""},
		{"1, 10%, 50% of 200, then the rest", w("1", "10%", "50%"), 200, []int{1, 19, 80, 100}, ""},
		{"percentages round up", w("10%", "50%", "100%"), 7, []int{1, 3, 3}, ""},
		{"a wave adding nothing is dropped", w("1", "10%", "2"), 5, []int{1, 1, 3}, ""},
		{"counts beyond the stage stop at its size", w("2", "50"), 5, []int{2, 3}, ""},
		{"the list ends with every Stack", w("1", "100%"), 3, []int{1, 2}, ""},
		{"one Stack", w("1", "10%", "50%"), 1, []int{1}, ""},
		{"no Stacks", w("1"), 0, []int{}, ""},
		{"a count as an int", &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(3)}}, 4, []int{3, 1}, ""},
		{"unreadable", w("1", "half"), 4, nil, `spec.rollout.waves[1]: "half" is neither a count nor a percentage`},
		{"over 100%", w("150%"), 4, nil, `spec.rollout.waves[0]: "150%" is neither`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waveOf, waves, err := Waves(tc.rollout, "prod", fleet(tc.n))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sizes(waveOf, waves); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("wave sizes = %v, want %v", got, tc.want)
			}
			if len(waveOf) != tc.n {
				t.Errorf("%d Stacks have a wave, want %d", len(waveOf), tc.n)
			}
		})
	}
}

func TestWavesFollowTheOrder(t *testing.T) {
	members := []RolloutMember{
		{Name: "eu-1", Labels: map[string]string{"ring": "2"}},
		{Name: "us-1", Labels: map[string]string{"ring": "10"}},
		{Name: "ap-1"},
		{Name: "canary", Labels: map[string]string{"ring": "0"}},
	}
	byLabel := &promotionv1alpha1.Rollout{
		Waves: []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(2)},
		Order: &promotionv1alpha1.RolloutOrder{By: promotionv1alpha1.OrderByLabel, Label: "ring"},
	}
	waveOf, waves, err := Waves(byLabel, "prod", members)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"canary": 1, "eu-1": 2, "us-1": 3, "ap-1": 3}
	if waves != 3 || !reflect.DeepEqual(waveOf, want) {
		t.Errorf("by label: %v in %d waves, want %v in 3 (ring 2 before ring 10, no ring last)", waveOf, waves, want)
	}

	names := func(ms []RolloutMember) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.Name
		}
		return out
	}
	if got := names(Order(nil, "prod", members)); !reflect.DeepEqual(got, []string{"ap-1", "canary", "eu-1", "us-1"}) {
		t.Errorf("by name: %v", got)
	}

	random := func(seed string) *promotionv1alpha1.Rollout {
		return &promotionv1alpha1.Rollout{Order: &promotionv1alpha1.RolloutOrder{By: promotionv1alpha1.OrderByRandom, Seed: seed}}
	}
	many := fleet(40)
	a, b := names(Order(random("x"), "prod", many)), names(Order(random("x"), "prod", many))
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave two orders")
	}
	if reflect.DeepEqual(a, names(Order(random("y"), "prod", many))) {
		t.Error("another seed gave the same order of 40 Stacks")
	}
	if reflect.DeepEqual(a, names(Order(nil, "prod", many))) {
		t.Error("a random order of 40 Stacks is the order by name")
	}
	if !reflect.DeepEqual(names(Order(random(""), "prod", many)), names(Order(random("prod"), "prod", many))) {
		t.Error("without a seed, the stage's name is not the seed")
	}
	// A Stack joining moves no other: the order of the others stays.
	joined := names(Order(random("x"), "prod", append(append([]RolloutMember(nil), many...), RolloutMember{Name: "new"})))
	var without []string
	for _, n := range joined {
		if n != "new" {
			without = append(without, n)
		}
	}
	if !reflect.DeepEqual(without, a) {
		t.Error("a Stack joining changed the order of the others")
	}
}

func TestFailureBudget(t *testing.T) {
	for _, tc := range []struct {
		budget  *intstr.IntOrString
		n       int
		want    int32
		wantErr bool
	}{
		{nil, 100, 0, false},
		{ptr(intstr.FromInt32(3)), 100, 3, false},
		{ptr(intstr.FromString("5%")), 200, 10, false},
		{ptr(intstr.FromString("5%")), 19, 0, false},
		{ptr(intstr.FromString("100%")), 7, 7, false},
		{ptr(intstr.FromString("2")), 7, 2, false},
		{ptr(intstr.FromString("lots")), 7, 0, true},
	} {
		got, err := FailureBudget(&promotionv1alpha1.Rollout{FailureBudget: tc.budget}, tc.n)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("FailureBudget(%v of %d) = %d, %v; want %d (error %v)", tc.budget, tc.n, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzWaves: whatever the waves say, every Stack gets exactly one wave,
// the waves are numbered 1..waves without a gap, and each holds a Stack.
func FuzzWaves(f *testing.F) {
	f.Add("1", "10%", "50%", 200)
	f.Add("0", "", "100%", 3)
	f.Add("7", "3", "x%", 0)
	f.Fuzz(func(t *testing.T, a, b, c string, n int) {
		if n < 0 || n > 2000 {
			return
		}
		r := &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.Parse(a), intstr.Parse(b), intstr.Parse(c)}}
		waveOf, waves, err := Waves(r, "prod", fleet(n))
		if err != nil {
			return
		}
		if len(waveOf) != n {
			t.Fatalf("%d of %d Stacks have a wave", len(waveOf), n)
		}
		for i, size := range sizes(waveOf, waves) {
			if size == 0 {
				t.Fatalf("wave %d of %d is empty (%q %q %q, %d Stacks)", i+1, waves, a, b, c, n)
			}
		}
	})
}
