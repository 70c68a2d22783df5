package change

import (
	"fmt"
	"slices"
	"strings"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Summarize reads a successful preview Update's outcome: the counts per
// kind of change, and the resources that would change with the names of
// their changed properties (never values), at most limit.
func Summarize(upd *autov1alpha1.Update, limit int) (*promotionv1alpha1.ChangeSummary, []promotionv1alpha1.ResourceChange) {
	c := upd.Status.Changes
	sum := &promotionv1alpha1.ChangeSummary{
		Create:  int32(c["create"] + c["import"]), //nolint:gosec // resource counts fit
		Update:  int32(c["update"]),               //nolint:gosec // resource counts fit
		Replace: int32(c["replace"]),              //nolint:gosec // resource counts fit
		Delete:  int32(c["delete"]),               //nolint:gosec // resource counts fit
		Same:    int32(c["same"]),                 //nolint:gosec // resource counts fit
	}
	var changes []promotionv1alpha1.ResourceChange
	for _, rc := range upd.Status.ResourceChanges {
		op := rc.Op
		switch op {
		case "import":
			op = "create"
		case "create", "update", "replace", "delete":
		default:
			// The halves of a replacement (create-replacement,
			// delete-replaced), reads, refreshes: the replace step and
			// the counts say it already.
			continue
		}
		if len(changes) == limit {
			break
		}
		changes = append(changes, promotionv1alpha1.ResourceChange{URN: rc.URN, Type: rc.Type, Op: op, Properties: rc.Properties})
	}
	return sum, changes
}

// DescribeSummary renders a preview's counts: "1 to update, 3 unchanged",
// or "no changes".
func DescribeSummary(sum *promotionv1alpha1.ChangeSummary) string {
	if sum == nil {
		return "not previewed"
	}
	var parts []string
	for _, c := range []struct {
		n    int32
		what string
	}{{sum.Create, "to create"}, {sum.Update, "to update"}, {sum.Replace, "to replace"}, {sum.Delete, "to delete"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	if sum.Same > 0 {
		parts = append(parts, fmt.Sprintf("%d unchanged", sum.Same))
	}
	return strings.Join(parts, ", ")
}

// DescribeFleet sums up the previews of many Stacks (their summaries;
// nil for a Stack not previewed) in one line, for an approver who cannot
// read each: the Stacks grouped by what their
// previews would change, the largest group first, e.g. "180 Stacks: 178
// with 3 to update; 2 with 3 to update, 1 to replace". Stacks not
// previewed (yet) are a group of their own. Counts of unchanged resources
// are left out, so that Stacks that change alike group together.
func DescribeFleet(summaries []*promotionv1alpha1.ChangeSummary) string {
	type group struct {
		what string
		n    int
	}
	var groups []*group
	byWhat := map[string]*group{}
	for _, sum := range summaries {
		what := "not previewed"
		if sum != nil {
			changed := *sum
			changed.Same = 0
			what = "with " + DescribeSummary(&changed)
		}
		g := byWhat[what]
		if g == nil {
			g = &group{what: what}
			byWhat[what] = g
			groups = append(groups, g)
		}
		g.n++
	}
	// Largest first; equal groups keep the order of their first Stack.
	slices.SortStableFunc(groups, func(a, b *group) int { return b.n - a.n })
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf("%d %s", g.n, g.what)
	}
	stacks := "Stacks"
	if len(summaries) == 1 {
		stacks = "Stack"
	}
	return fmt.Sprintf("%d %s: %s", len(summaries), stacks, strings.Join(parts, "; "))
}
