package dashboard

import (
	"cmp"
	"fmt"
	"slices"
)

// Geometry of a laid-out pipeline graph, in SVG user units.
const (
	graphBoxW   = 180 // width of a box
	graphBoxH   = 64  // height of a box
	graphColGap = 80  // horizontal space between two columns of boxes
	graphRowGap = 24  // vertical space between two boxes of a column
	graphMargin = 16  // space around the whole drawing

	// graphSourceName names the source node of every layout.
	graphSourceName = "git"
)

// GraphStage is one stage as the layout needs it.
type GraphStage struct {
	Name     string
	Direct   bool     // takes releases straight from the pipeline (an edge from the source node)
	Upstream []string // upstream stage names (edges from each to this stage); unknown names are ignored
}

// Layout is a placed graph, in SVG user units.
type Layout struct {
	Width, Height int
	Source        Node   // the pipeline's source node ("git"), always in column 0
	Nodes         []Node // one per stage, in the input order
	Edges         []Edge
}

// Node is a placed box: its column and row in the graph, and its top-left
// corner (X, Y) and size (W, H).
type Node struct {
	Name        string
	Column, Row int
	X, Y, W, H  int
}

// Edge joins two boxes.
type Edge struct {
	From, To string // stage names; From is "" for the source node
	Path     string // an SVG path "d": a cubic Bézier from the right middle of From's box to the left middle of To's box
	All      bool   // set by the caller, leave false
}

// LayoutGraph places stages: the source node in column 0; a stage's column
// is 1 + the longest chain of known upstream stages feeding it (a stage with
// no known upstream and Direct is in column 1; a stage with neither is also
// column 1). Rows: within a column, stages are ordered to reduce crossings
// with a barycenter of their upstreams' rows (ties by name), rows are
// 0..n-1; the source node is vertically centred.
//
// The columns are filled from the top. For the barycenter the source node
// counts as sitting at its centred height, and a stage without any upstream
// edge goes below those that have one.
//
// Cycles are broken by a depth-first walk downstream, started from the
// Direct stages, then from the stages without a known upstream, then from
// the rest, each group by name, and the successors of a stage by name: an
// edge that leads back to a stage still on the walk is ignored for the
// placement and left out of Edges, as are self-references and repeated
// upstream names. Placement never depends on the order of the input or of an
// Upstream list (when names are unique; of stages sharing a name, the first
// is the one that upstream references mean).
//
// Edges come in the order of their To stage in the input: the edge from the
// source first, if the stage is Direct, then one per upstream in the order
// of its Upstream list. The same input always gives the same Layout.
func LayoutGraph(stages []GraphStage) Layout {
	n := len(stages)
	byName := func(a, b int) int {
		return cmp.Or(cmp.Compare(stages[a].Name, stages[b].Name), cmp.Compare(a, b))
	}

	index := make(map[string]int, n)
	for i, s := range stages {
		if _, dup := index[s.Name]; !dup {
			index[s.Name] = i
		}
	}

	// ups[i] holds the distinct known upstreams of stage i in listed order;
	// down[j] the stages that name j as an upstream, by name.
	ups := make([][]int, n)
	down := make([][]int, n)
	for i, s := range stages {
		for _, name := range s.Upstream {
			j, ok := index[name]
			if !ok || slices.Contains(ups[i], j) {
				continue
			}
			ups[i] = append(ups[i], j)
			down[j] = append(down[j], i)
		}
	}
	for j := range down {
		slices.SortFunc(down[j], byName)
	}

	// Break cycles: walk downstream depth first and drop every back edge.
	// The reverse of the finishing order is a topological order of the
	// edges that are kept.
	roots := make([]int, n)
	for i := range roots {
		roots[i] = i
	}
	rootGroup := func(i int) int {
		switch {
		case stages[i].Direct:
			return 0
		case len(ups[i]) == 0:
			return 1
		default:
			return 2
		}
	}
	slices.SortFunc(roots, func(a, b int) int {
		return cmp.Or(cmp.Compare(rootGroup(a), rootGroup(b)), byName(a, b))
	})
	const (
		unseen = iota
		onWalk
		done
	)
	state := make([]int, n)
	back := make(map[[2]int]bool) // {from, to} of each ignored edge
	finished := make([]int, 0, n)
	var walk func(j int)
	walk = func(j int) {
		state[j] = onWalk
		for _, i := range down[j] {
			switch state[i] {
			case unseen:
				walk(i)
			case onWalk:
				back[[2]int{j, i}] = true
			}
		}
		state[j] = done
		finished = append(finished, j)
	}
	for _, r := range roots {
		if state[r] == unseen {
			walk(r)
		}
	}

	// in[i] holds the upstreams of stage i whose edges are kept.
	in := make([][]int, n)
	for i := range ups {
		for _, j := range ups[i] {
			if !back[[2]int{j, i}] {
				in[i] = append(in[i], j)
			}
		}
	}

	col := make([]int, n)
	maxCol := 0
	for k := len(finished) - 1; k >= 0; k-- {
		i := finished[k]
		col[i] = 1
		for _, j := range in[i] {
			col[i] = max(col[i], col[j]+1)
		}
		maxCol = max(maxCol, col[i])
	}

	columns := make([][]int, maxCol+1)
	for i := range n {
		columns[col[i]] = append(columns[col[i]], i)
	}
	maxRows := 1
	for _, c := range columns {
		maxRows = max(maxRows, len(c))
	}

	// Order each column by the barycenter of its stages' upstream rows,
	// kept as an exact fraction sum/count of doubled rows so that the
	// source's centred row, (maxRows-1)/2, stays an integer.
	row := make([]int, n)
	sum := make([]int, n)
	count := make([]int, n)
	for c := 1; c <= maxCol; c++ {
		members := columns[c]
		for _, i := range members {
			if stages[i].Direct {
				sum[i] += maxRows - 1
				count[i]++
			}
			for _, j := range in[i] {
				sum[i] += 2 * row[j]
				count[i]++
			}
		}
		slices.SortFunc(members, func(a, b int) int {
			if noneA, noneB := count[a] == 0, count[b] == 0; noneA != noneB {
				if noneA {
					return 1
				}
				return -1
			}
			return cmp.Or(cmp.Compare(sum[a]*count[b], sum[b]*count[a]), byName(a, b))
		})
		for r, i := range members {
			row[i] = r
		}
	}

	l := Layout{
		Width:  2*graphMargin + (maxCol+1)*graphBoxW + maxCol*graphColGap,
		Height: 2*graphMargin + maxRows*graphBoxH + (maxRows-1)*graphRowGap,
		Nodes:  make([]Node, n),
	}
	l.Source = Node{
		Name: graphSourceName,
		X:    graphMargin,
		Y:    (l.Height - graphBoxH) / 2,
		W:    graphBoxW,
		H:    graphBoxH,
	}
	for i, s := range stages {
		l.Nodes[i] = Node{
			Name:   s.Name,
			Column: col[i],
			Row:    row[i],
			X:      graphMargin + col[i]*(graphBoxW+graphColGap),
			Y:      graphMargin + row[i]*(graphBoxH+graphRowGap),
			W:      graphBoxW,
			H:      graphBoxH,
		}
	}
	for i, s := range stages {
		to := l.Nodes[i]
		if s.Direct {
			l.Edges = append(l.Edges, Edge{To: s.Name, Path: graphEdgePath(l.Source, to)})
		}
		for _, j := range in[i] {
			l.Edges = append(l.Edges, Edge{From: stages[j].Name, To: s.Name, Path: graphEdgePath(l.Nodes[j], to)})
		}
	}
	return l
}

// graphEdgePath draws a cubic Bézier from the middle of from's right side to
// the middle of to's left side, leaving and arriving horizontally.
func graphEdgePath(from, to Node) string {
	x1, y1 := from.X+from.W, from.Y+from.H/2
	x2, y2 := to.X, to.Y+to.H/2
	bend := (x2 - x1) / 2
	return fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1+bend, y1, x2-bend, y2, x2, y2)
}
