package shard

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func obj(labels map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "app", Labels: labels}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name, shard string
		others      []string
		want        Shard
		err         string
	}{
		{name: "unsharded", want: Shard{}},
		{name: "default of three", others: []string{"b", "a"}, want: Shard{Others: []string{"a", "b"}}},
		{name: "named", shard: "a", others: []string{"a", "b"}, want: Shard{Name: "a"}},
		{name: "named without the list", shard: "a", want: Shard{Name: "a"}},
		{name: "named, not in the list", shard: "c", others: []string{"a", "b"}, err: "--shard=c is not among --shards=a,b"},
		{name: "the default's name", shard: "default", err: `--shard: "default" is the default shard's name`},
		{name: "the default's name listed", others: []string{"default"}, err: `--shards: "default"`},
		{name: "not a label value", shard: "A_b/c", err: `--shard: "A_b/c" is not a shard name`},
		{name: "upper case", shard: "Blue", err: `--shard: "Blue" is not a shard name (lower-case`},
		{name: "empty in the list", others: []string{"a", ""}, err: `--shards: a shard name cannot be empty`},
		{name: "listed twice", others: []string{"a", "a"}, err: `--shards: "a" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := New(tc.shard, tc.others)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("New(%q, %q) = %v, want an error containing %q", tc.shard, tc.others, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || strings.Join(got.Others, ",") != strings.Join(tc.want.Others, ",") {
				t.Fatalf("New(%q, %q) = %+v, want %+v", tc.shard, tc.others, got, tc.want)
			}
		})
	}
}

// TestOwns checks that every object has exactly one owner among the shards
// of an installation, whatever its label says, and that an unsharded
// operator owns them all.
func TestOwns(t *testing.T) {
	def := Shard{Others: []string{"a", "b"}}
	a, b := Shard{Name: "a"}, Shard{Name: "b"}
	for _, tc := range []struct {
		labels map[string]string
		owner  string
	}{
		{labels: nil, owner: "default"},
		{labels: map[string]string{"team": "x"}, owner: "default"},
		{labels: map[string]string{Label: "a"}, owner: "a"},
		{labels: map[string]string{Label: "b"}, owner: "b"},
		// No shard by that name runs: the default takes it rather than
		// leave it unreconciled.
		{labels: map[string]string{Label: "c"}, owner: "default"},
		{labels: map[string]string{Label: ""}, owner: "default"},
	} {
		o := obj(tc.labels)
		var owners []string
		for _, s := range []Shard{def, a, b} {
			if s.Owns(o) {
				owners = append(owners, s.String())
			}
		}
		if len(owners) != 1 || owners[0] != tc.owner {
			t.Errorf("labels %v: owned by %v, want %s alone", tc.labels, owners, tc.owner)
		}
		if !(Shard{}).Owns(o) {
			t.Errorf("labels %v: the unsharded operator does not own it", tc.labels)
		}
	}
}

func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		s    Shard
		want string
	}{
		{Shard{}, ""},
		{Shard{Others: []string{"a", "b"}}, Label + " notin (a,b)"},
		{Shard{Name: "a"}, Label + "=a"},
	} {
		if got := tc.s.Selector().String(); got != tc.want {
			t.Errorf("%+v: selector %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestStamp(t *testing.T) {
	to := obj(map[string]string{Label: "a", "keep": "1"})
	Stamp(obj(map[string]string{Label: "b"}), to)
	if to.Labels[Label] != "b" || to.Labels["keep"] != "1" {
		t.Fatalf("stamped %v", to.Labels)
	}
	Stamp(obj(nil), to)
	if _, ok := to.Labels[Label]; ok || to.Labels["keep"] != "1" {
		t.Fatalf("an unlabelled source left %v", to.Labels)
	}
	bare := obj(nil)
	Stamp(obj(map[string]string{Label: "a"}), bare)
	if bare.Labels[Label] != "a" {
		t.Fatalf("stamped a label-less object: %v", bare.Labels)
	}
	Stamp(obj(nil), obj(nil)) // nothing to remove, no map to make
}

func TestLeaderElectionID(t *testing.T) {
	if got := (Shard{Others: []string{"a"}}).LeaderElectionID("x.example"); got != "x.example" {
		t.Errorf("default shard: %q", got)
	}
	if got := (Shard{Name: "a"}).LeaderElectionID("x.example"); got != "a.shard.x.example" {
		t.Errorf("shard a: %q", got)
	}
}

func TestMoved(t *testing.T) {
	p := Shard{Name: "a"}.Moved()
	in, out := obj(map[string]string{Label: "a"}), obj(nil)
	for _, tc := range []struct {
		old, new *metav1.ObjectMeta
		want     bool
	}{
		{out, in, true},
		{in, out, true},
		{in, in, false},
		{out, out, false},
	} {
		e := event.UpdateEvent{ObjectOld: &corev1.ConfigMap{ObjectMeta: *tc.old}, ObjectNew: &corev1.ConfigMap{ObjectMeta: *tc.new}}
		if got := p.Update(e); got != tc.want {
			t.Errorf("%v → %v: %v, want %v", tc.old.Labels, tc.new.Labels, got, tc.want)
		}
	}
	if p.Create(event.CreateEvent{Object: &corev1.ConfigMap{ObjectMeta: *in}}) {
		t.Error("a create passed: the other predicates decide those")
	}
}

func TestElsewhere(t *testing.T) {
	err := Shard{Name: "a"}.Elsewhere("spec.prerequisites[0]", "Stack", obj(map[string]string{Label: "b"}))
	want := "spec.prerequisites[0]: Stack app is in another shard (stackyard.dev/shard=b) and this object is in shard a"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("%v\nwant it to start %q", err, want)
	}
}
