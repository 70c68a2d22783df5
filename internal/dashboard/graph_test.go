package dashboard

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestLayoutGraph(t *testing.T) {
	tests := []struct {
		name     string
		stages   []GraphStage
		wantCols map[string]int
		wantRows map[string]int
		// wantEdges lists "from->to" in order, with "git" for the source.
		wantEdges []string
	}{{
		name:      "empty",
		wantEdges: nil,
	}, {
		name: "linear chain",
		stages: []GraphStage{
			{Name: "dev", Direct: true},
			{Name: "qa", Upstream: []string{"dev"}},
			{Name: "prod", Upstream: []string{"qa"}},
		},
		wantCols:  map[string]int{"dev": 1, "qa": 2, "prod": 3},
		wantRows:  map[string]int{"dev": 0, "qa": 0, "prod": 0},
		wantEdges: []string{"git->dev", "dev->qa", "qa->prod"},
	}, {
		name: "fan-out from the source, fan-in",
		stages: []GraphStage{
			{Name: "dev", Direct: true},
			{Name: "dev2", Direct: true},
			{Name: "qa", Upstream: []string{"dev", "dev2"}},
		},
		wantCols:  map[string]int{"dev": 1, "dev2": 1, "qa": 2},
		wantRows:  map[string]int{"dev": 0, "dev2": 1, "qa": 0},
		wantEdges: []string{"git->dev", "git->dev2", "dev->qa", "dev2->qa"},
	}, {
		name: "fan-out from a stage, fan-in",
		stages: []GraphStage{
			{Name: "prod", Upstream: []string{"qa"}},
			{Name: "qa", Upstream: []string{"dev2", "dev"}},
			{Name: "dev2", Upstream: []string{"build"}},
			{Name: "dev", Upstream: []string{"build"}},
			{Name: "build", Direct: true},
		},
		wantCols:  map[string]int{"build": 1, "dev": 2, "dev2": 2, "qa": 3, "prod": 4},
		wantRows:  map[string]int{"build": 0, "dev": 0, "dev2": 1, "qa": 0, "prod": 0},
		wantEdges: []string{"qa->prod", "dev2->qa", "dev->qa", "build->dev2", "build->dev", "git->build"},
	}, {
		name: "longest chain decides the column",
		stages: []GraphStage{
			{Name: "a", Direct: true},
			{Name: "b", Upstream: []string{"a"}},
			{Name: "c", Direct: true, Upstream: []string{"a", "b"}},
		},
		wantCols:  map[string]int{"a": 1, "b": 2, "c": 3},
		wantEdges: []string{"git->a", "a->b", "git->c", "a->c", "b->c"},
	}, {
		name: "unknown upstream",
		stages: []GraphStage{
			{Name: "a", Direct: true},
			{Name: "b", Upstream: []string{"ghost"}},
			{Name: "c", Direct: true, Upstream: []string{"ghost", "a"}},
		},
		wantCols:  map[string]int{"a": 1, "b": 1, "c": 2},
		wantRows:  map[string]int{"a": 0, "b": 1, "c": 0},
		wantEdges: []string{"git->a", "git->c", "a->c"},
	}, {
		name: "no upstream and not direct",
		stages: []GraphStage{
			{Name: "orphan"},
			{Name: "b", Direct: true},
			{Name: "a", Direct: true},
		},
		wantCols:  map[string]int{"orphan": 1, "a": 1, "b": 1},
		wantRows:  map[string]int{"a": 0, "b": 1, "orphan": 2},
		wantEdges: []string{"git->b", "git->a"},
	}, {
		name: "repeated upstream names",
		stages: []GraphStage{
			{Name: "a", Direct: true},
			{Name: "b", Upstream: []string{"a", "a"}},
		},
		wantCols:  map[string]int{"a": 1, "b": 2},
		wantEdges: []string{"git->a", "a->b"},
	}, {
		name: "cycle behind an entry, and a self-loop",
		stages: []GraphStage{
			{Name: "a", Direct: true, Upstream: []string{"c"}},
			{Name: "b", Upstream: []string{"a"}},
			{Name: "c", Upstream: []string{"b"}},
			{Name: "d", Upstream: []string{"d"}},
			{Name: "e", Upstream: []string{"b"}},
		},
		wantCols:  map[string]int{"a": 1, "b": 2, "c": 3, "d": 1, "e": 3},
		wantRows:  map[string]int{"a": 0, "d": 1, "b": 0, "c": 0, "e": 1},
		wantEdges: []string{"git->a", "a->b", "b->c", "b->e"},
	}, {
		name: "cycle without an entry",
		stages: []GraphStage{
			{Name: "y", Upstream: []string{"x"}},
			{Name: "x", Upstream: []string{"y"}},
		},
		wantCols:  map[string]int{"x": 1, "y": 2},
		wantEdges: []string{"x->y"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := layoutWithin(t, tt.stages)
			checkGraphLayout(t, tt.stages, l)
			for _, nd := range l.Nodes {
				if want, ok := tt.wantCols[nd.Name]; ok && nd.Column != want {
					t.Errorf("%s: column %d, want %d", nd.Name, nd.Column, want)
				}
				if want, ok := tt.wantRows[nd.Name]; ok && nd.Row != want {
					t.Errorf("%s: row %d, want %d", nd.Name, nd.Row, want)
				}
			}
			var edges []string
			for _, e := range l.Edges {
				from := e.From
				if from == "" {
					from = "git"
				}
				edges = append(edges, from+"->"+e.To)
			}
			if !slices.Equal(edges, tt.wantEdges) {
				t.Errorf("edges %q, want %q", edges, tt.wantEdges)
			}
		})
	}
}

func TestLayoutGraphDeterministic(t *testing.T) {
	stages := []GraphStage{
		{Name: "build", Direct: true},
		{Name: "dev", Upstream: []string{"build"}},
		{Name: "dev2", Upstream: []string{"build"}},
		{Name: "hotfix", Direct: true},
		{Name: "qa", Upstream: []string{"dev", "dev2", "ghost"}},
		{Name: "perf", Upstream: []string{"dev2"}},
		{Name: "staging", Upstream: []string{"qa", "perf", "hotfix"}},
		{Name: "prod", Upstream: []string{"staging", "canary"}},
		{Name: "canary", Upstream: []string{"prod"}}, // a cycle with prod
		{Name: "loop1", Upstream: []string{"loop2"}},
		{Name: "loop2", Upstream: []string{"loop1"}},
		{Name: "lonely"},
		{Name: "direct2", Direct: true, Upstream: []string{"hotfix"}},
	}
	want := LayoutGraph(stages)
	checkGraphLayout(t, stages, want)

	again := LayoutGraph(slices.Clone(stages))
	if !reflect.DeepEqual(again, want) || fmt.Sprintf("%#v", again) != fmt.Sprintf("%#v", want) {
		t.Fatalf("same input, different layouts:\n%#v\n%#v", want, again)
	}

	place := func(l Layout) map[string]Node {
		m := make(map[string]Node, len(l.Nodes))
		for _, nd := range l.Nodes {
			m[nd.Name] = nd
		}
		return m
	}
	wantPlace := place(want)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 100 {
		shuffled := make([]GraphStage, len(stages))
		for i, s := range stages {
			s.Upstream = slices.Clone(s.Upstream)
			rng.Shuffle(len(s.Upstream), func(a, b int) {
				s.Upstream[a], s.Upstream[b] = s.Upstream[b], s.Upstream[a]
			})
			shuffled[i] = s
		}
		rng.Shuffle(len(shuffled), func(a, b int) {
			shuffled[a], shuffled[b] = shuffled[b], shuffled[a]
		})
		got := LayoutGraph(shuffled)
		checkGraphLayout(t, shuffled, got)
		if got.Width != want.Width || got.Height != want.Height || got.Source != want.Source {
			t.Fatalf("round %d: size %dx%d source %+v, want %dx%d source %+v",
				round, got.Width, got.Height, got.Source, want.Width, want.Height, want.Source)
		}
		if gotPlace := place(got); !reflect.DeepEqual(gotPlace, wantPlace) {
			t.Fatalf("round %d: placement depends on input order:\n%v\nwant\n%v", round, gotPlace, wantPlace)
		}
		if len(got.Edges) != len(want.Edges) {
			t.Fatalf("round %d: %d edges, want %d", round, len(got.Edges), len(want.Edges))
		}
	}
}

// layoutWithin runs LayoutGraph and fails the test if it does not return
// promptly (a cycle that is not broken).
func layoutWithin(t *testing.T, stages []GraphStage) Layout {
	t.Helper()
	ch := make(chan Layout, 1)
	go func() { ch <- LayoutGraph(stages) }()
	select {
	case l := <-ch:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("LayoutGraph did not return")
		return Layout{}
	}
}

// checkGraphLayout checks what every layout must satisfy: one node per
// stage in input order, columns left of their successors, no overlapping
// boxes, a size that holds every box plus the margin, a centred source, and
// edges from the right middle of From to the left middle of To.
func checkGraphLayout(t *testing.T, stages []GraphStage, l Layout) {
	t.Helper()
	if len(l.Nodes) != len(stages) {
		t.Fatalf("%d nodes for %d stages", len(l.Nodes), len(stages))
	}
	byName := map[string]Node{}
	for i, nd := range l.Nodes {
		if nd.Name != stages[i].Name {
			t.Errorf("node %d is %q, want %q", i, nd.Name, stages[i].Name)
		}
		if nd.Column < 1 {
			t.Errorf("%s: column %d, want at least 1", nd.Name, nd.Column)
		}
		if _, dup := byName[nd.Name]; dup {
			t.Errorf("%s placed twice", nd.Name)
		}
		byName[nd.Name] = nd
	}

	src := l.Source
	if src.Name != "git" || src.Column != 0 || src.Row != 0 {
		t.Errorf("source %+v, want git in column 0, row 0", src)
	}
	if d := 2*src.Y + src.H - l.Height; d < -1 || d > 1 {
		t.Errorf("source at y=%d (h=%d) is not centred in height %d", src.Y, src.H, l.Height)
	}

	boxes := append([]Node{src}, l.Nodes...)
	right, bottom := 0, 0
	for i, a := range boxes {
		if a.W <= 0 || a.H <= 0 {
			t.Errorf("%s: empty box %dx%d", a.Name, a.W, a.H)
		}
		if a.X < graphMargin || a.Y < graphMargin ||
			a.X+a.W > l.Width-graphMargin || a.Y+a.H > l.Height-graphMargin {
			t.Errorf("%s: box %+v outside %dx%d less the margin", a.Name, a, l.Width, l.Height)
		}
		right, bottom = max(right, a.X+a.W), max(bottom, a.Y+a.H)
		for _, b := range boxes[i+1:] {
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("boxes overlap: %+v and %+v", a, b)
			}
		}
	}
	if right+graphMargin != l.Width || bottom+graphMargin != l.Height {
		t.Errorf("size %dx%d, want %dx%d to fit the boxes tightly", l.Width, l.Height, right+graphMargin, bottom+graphMargin)
	}

	for _, e := range l.Edges {
		from, ok := src, true
		if e.From != "" {
			from, ok = byName[e.From]
		}
		to, ok2 := byName[e.To]
		if !ok || !ok2 {
			t.Errorf("edge %q->%q joins an unknown box", e.From, e.To)
			continue
		}
		if e.All {
			t.Errorf("edge %q->%q: All set", e.From, e.To)
		}
		if from.Column >= to.Column {
			t.Errorf("edge %q->%q goes from column %d to %d", e.From, e.To, from.Column, to.Column)
		}
		var x1, y1, c1x, c1y, c2x, c2y, x2, y2 int
		if n, err := fmt.Sscanf(e.Path, "M%d,%d C%d,%d %d,%d %d,%d", &x1, &y1, &c1x, &c1y, &c2x, &c2y, &x2, &y2); err != nil || n != 8 {
			t.Errorf("edge %q->%q: path %q is not one cubic Bézier: %v", e.From, e.To, e.Path, err)
			continue
		}
		if x1 != from.X+from.W || y1 != from.Y+from.H/2 {
			t.Errorf("edge %q->%q starts at %d,%d, want the right middle of %+v", e.From, e.To, x1, y1, from)
		}
		if x2 != to.X || y2 != to.Y+to.H/2 {
			t.Errorf("edge %q->%q ends at %d,%d, want the left middle of %+v", e.From, e.To, x2, y2, to)
		}
	}
}
