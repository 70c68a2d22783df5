package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/source"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pattern, file string
		want          bool
	}{
		{"infra", "infra/main.yaml", true},
		{"infra/", "infra/a/b.yaml", true},
		{"infra", "infrastructure/x", false},
		{"infra/main.yaml", "infra/main.yaml", true},
		{"/infra", "infra/x", true},
		{"./infra", "infra/x", true},
		{"*.yaml", "Pulumi.yaml", true},
		{"*.yaml", "infra/deep/stack.yaml", true},
		{"*.yaml", "README.md", false},
		{"infra/*.yaml", "infra/a.yaml", true},
		{"infra/*.yaml", "infra/sub/a.yaml", false},
		{"infra/*", "infra/sub/a.yaml", true},
		{"docs/**", "docs/x.md", true},
		{"[", "[", false}, // a malformed glob matches nothing
		{"", "anything", false},
	}
	for _, tt := range tests {
		if got := matchPath(tt.pattern, tt.file); got != tt.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", tt.pattern, tt.file, got, tt.want)
		}
	}
}

func TestAdmits(t *testing.T) {
	commit := func(paths ...string) source.Commit { return source.Commit{Paths: paths, Diffed: true} }
	tests := []struct {
		name             string
		include, exclude []string
		commit           source.Commit
		want             bool
	}{
		{name: "no filters", commit: commit("any"), want: true},
		{name: "no filters, paths unknown", commit: source.Commit{}, want: true},
		{name: "included", include: []string{"infra"}, commit: commit("README.md", "infra/a.yaml"), want: true},
		{name: "not included", include: []string{"infra"}, commit: commit("README.md"), want: false},
		{name: "only excluded", exclude: []string{"docs", "*.md"}, commit: commit("docs/a.txt", "README.md"), want: false},
		{name: "excluded and more", exclude: []string{"docs"}, commit: commit("docs/a.txt", "main.go"), want: true},
		{name: "included but excluded", include: []string{"infra"}, exclude: []string{"infra/README.md"}, commit: commit("infra/README.md", "docs/x"), want: false},
		{name: "included, one excluded", include: []string{"infra"}, exclude: []string{"*.md"}, commit: commit("infra/README.md", "infra/a.yaml"), want: true},
		{name: "filters, paths unknown", include: []string{"infra"}, commit: source.Commit{}, want: false},
		{name: "filters, changes nothing", exclude: []string{"docs"}, commit: commit(), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := selection{include: tt.include, exclude: tt.exclude}
			if got := s.admits(tt.commit); got != tt.want {
				t.Errorf("admits = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBranchCandidates(t *testing.T) {
	history := []source.Commit{
		{SHA: "e", Paths: []string{"infra/e"}, Diffed: true},
		{SHA: "d", Paths: []string{"docs/d"}, Diffed: true},
		{SHA: "c", Paths: []string{"infra/c"}, Diffed: true},
		{SHA: "b", Paths: []string{"infra/b"}, Diffed: true},
		{SHA: "a", Paths: []string{"infra/a"}, Diffed: true},
	}
	shas := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.commit.SHA)
			if c.branch != "main" {
				t.Errorf("candidate %s: branch %q", c.commit.SHA, c.branch)
			}
		}
		return out
	}
	known := func(set ...string) func(string) bool { return func(s string) bool { return slices.Contains(set, s) } }
	tests := []struct {
		name    string
		sel     selection
		known   func(string) bool
		want    []string
		wantNil bool
	}{
		{name: "first discovery takes all", known: known(), want: []string{"e", "d", "c", "b", "a"}},
		{name: "stops at the newest release", known: known("b", "a"), want: []string{"e", "d", "c"}},
		{name: "stops at any release", known: known("c"), want: []string{"e", "d"}},
		{name: "nothing new", known: known("e"), wantNil: true},
		{name: "path filters", sel: selection{include: []string{"infra"}}, known: known("b"), want: []string{"e", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shas(tt.sel.branchCandidates(history, tt.known, "main"))
			if tt.wantNil && got != nil || !tt.wantNil && !slices.Equal(got, tt.want) {
				t.Errorf("candidates = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOrderTags(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tags := []source.Ref{
		{Name: "refs/tags/v1.2.0", Commit: "c120"},
		{Name: "refs/tags/v1.10.0", Commit: "c1100"},
		{Name: "refs/tags/v2.0.0-rc.1", Commit: "c2rc"},
		{Name: "refs/tags/1.9.3", Commit: "c193"},
		{Name: "refs/tags/latest", Commit: "c1100"}, // a second tag of one commit
		{Name: "refs/tags/not-a-version", Commit: "cx"},
		{Name: "refs/tags/" + strings.Repeat("x", maxTagLength+1), Commit: "clong"},
	}
	times := map[string]time.Time{
		"c120": t0.Add(4 * time.Hour), "c1100": t0.Add(time.Hour), "c2rc": t0.Add(3 * time.Hour),
		"c193": t0.Add(2 * time.Hour), "cx": t0, "clong": t0.Add(9 * time.Hour),
	}
	tags2 := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.tag)
		}
		return out
	}
	tests := []struct {
		name string
		spec promotionv1alpha1.GitSubscription
		want []string
	}{
		{name: "semver, newest version first", spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer},
			want: []string{"v2.0.0-rc.1", "v1.10.0", "1.9.3", "v1.2.0"}},
		{name: "semver within a constraint", spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer, SemverConstraint: "^1.2.0"},
			want: []string{"v1.10.0", "1.9.3", "v1.2.0"}},
		{name: "semver, limited", spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer, SemverConstraint: ">=1.0.0 <2.0.0", DiscoveryLimit: 2},
			want: []string{"v1.10.0", "1.9.3"}},
		{name: "newest tag by commit time, one per commit", spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.NewestTag},
			want: []string{"v1.2.0", "v2.0.0-rc.1", "1.9.3", "v1.10.0", "not-a-version"}},
		{name: "lexical", spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.Lexical},
			want: []string{"v2.0.0-rc.1", "v1.2.0", "v1.10.0", "not-a-version", "1.9.3"}}, // "latest" is v1.10.0's commit
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := newSelection(&tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := tags2(sel.orderTags(tags, times)); !slices.Equal(got, tt.want) {
				t.Errorf("orderTags = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNewSelection(t *testing.T) {
	sel, err := newSelection(&promotionv1alpha1.GitSubscription{})
	if err != nil || sel.strategy != promotionv1alpha1.NewestFromBranch || sel.limit != DefaultDiscoveryLimit || sel.usesTags() {
		t.Errorf("defaults: %+v, %v", sel, err)
	}
	_, err = newSelection(&promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer, SemverConstraint: "not a range"})
	if err == nil || !strings.HasPrefix(err.Error(), "spec.git.semverConstraint: ") {
		t.Errorf("bad constraint: %v, want an error naming spec.git.semverConstraint", err)
	}
}

func TestNewerThan(t *testing.T) {
	sel, _ := newSelection(&promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer})
	ordered := sel.orderTags([]source.Ref{
		{Name: "refs/tags/v3.0.0", Commit: "c3"}, {Name: "refs/tags/v2.0.0", Commit: "c2"}, {Name: "refs/tags/v1.0.0", Commit: "c1"},
	}, nil)
	v := func(tag string) *version { v, _ := sel.versionOf(tag, time.Time{}); return &v }
	for _, tt := range []struct {
		newest *version
		want   int
	}{
		{newest: nil, want: 3},
		{newest: v("v2.0.0"), want: 1},
		{newest: v("v1.5.0"), want: 2}, // a release whose tag is gone still counts
		{newest: v("v3.0.0"), want: 0},
		{newest: v("v9.0.0"), want: 0},
	} {
		if got := sel.newerThan(ordered, tt.newest); len(got) != tt.want {
			t.Errorf("newerThan(%v) = %d candidates, want %d", tt.newest, len(got), tt.want)
		}
	}
}

func TestNewest(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rel := func(name, tag string, at time.Time, created int) promotionv1alpha1.Release {
		ct := metav1.NewTime(at)
		return promotionv1alpha1.Release{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))},
			Spec:       promotionv1alpha1.ReleaseSpec{Commit: promotionv1alpha1.ReleaseCommit{Tag: tag, Time: &ct}},
		}
	}
	releases := []promotionv1alpha1.Release{
		rel("a", "v1.0.0", t0.Add(3*time.Hour), 1),
		rel("b", "v2.0.0", t0.Add(time.Hour), 2),
		rel("c", "v3.0.0", t0.Add(2*time.Hour), 3),
		rel("d", "", t0.Add(2*time.Hour), 4),
	}
	for _, tt := range []struct {
		spec promotionv1alpha1.GitSubscription
		want string
	}{
		{spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer}, want: "c"},
		{spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer, SemverConstraint: "<3"}, want: "b"},
		{spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.NewestTag}, want: "a"},
		{spec: promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.Lexical}, want: "c"},
		// Branch heads by commit time; a tie goes to the later created.
		{spec: promotionv1alpha1.GitSubscription{}, want: "a"},
	} {
		sel, _ := newSelection(&tt.spec)
		if i := sel.newest(releases); i < 0 || releases[i].Name != tt.want {
			t.Errorf("%s %q: newest = %d, want %s", tt.spec.CommitSelectionStrategy, tt.spec.SemverConstraint, i, tt.want)
		}
	}
	sel, _ := newSelection(&promotionv1alpha1.GitSubscription{})
	tie := []promotionv1alpha1.Release{rel("x", "", t0, 1), rel("y", "", t0, 2)}
	if i := sel.newest(tie); i != 1 {
		t.Errorf("newest of a tie = %d, want the later created", i)
	}
	if i := sel.newest(nil); i != -1 {
		t.Errorf("newest of none = %d", i)
	}
}

// FuzzMatchPath feeds user-written path patterns to matchPath: it never
// panics, and a plain path matches itself and what is below it.
func FuzzMatchPath(f *testing.F) {
	for _, seed := range [][2]string{{"infra", "infra/a.yaml"}, {"*.yaml", "a/b.yaml"}, {"[", "["}, {"a/**/b", "a/x/b"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, file string) {
		matchPath(pattern, file)
		plain := file != "" && !strings.ContainsAny(file, `*?[\`) && !strings.HasPrefix(file, "/") && !strings.HasPrefix(file, "./") &&
			!strings.HasSuffix(file, "/")
		if plain && (!matchPath(file, file) || !matchPath(file, file+"/below")) {
			t.Errorf("the plain pattern %q does not match itself or below", file)
		}
	})
}

// FuzzSelection feeds user-written semver constraints and tags to the
// selection: it never panics, and what it admits has a version.
func FuzzSelection(f *testing.F) {
	f.Add("^1.2.0", "v1.2.3")
	f.Add(">=1.0.0 <2.0.0 || 3.x", "3.1")
	f.Add("~", "v")
	f.Fuzz(func(t *testing.T, constraint, tag string) {
		sel, err := newSelection(&promotionv1alpha1.GitSubscription{CommitSelectionStrategy: promotionv1alpha1.SemVer, SemverConstraint: constraint})
		if err != nil {
			return
		}
		if v, ok := sel.versionOf(tag, time.Time{}); ok && v.sv == nil {
			t.Errorf("%q admitted without a version", tag)
		}
	})
}
