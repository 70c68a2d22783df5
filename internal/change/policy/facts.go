package policy

import (
	"slices"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Facts are the variables a rule sees, built from a promotion's previews,
// its release and its request. They hold names and counts only.
type Facts struct {
	vars map[string]any
}

// FactsOf builds the facts of promotion p of release (nil: only its name
// is known) from its previews, Stack by Stack.
func FactsOf(p *promotionv1alpha1.Promotion, previews []promotionv1alpha1.StackPreview, release *promotionv1alpha1.Release) Facts {
	var (
		changes = []map[string]any{}
		stacks  = []map[string]any{}
		total   promotionv1alpha1.ChangeSummary
		paths   []string
	)
	for _, pv := range previews {
		var sum promotionv1alpha1.ChangeSummary
		if pv.Summary != nil {
			sum = *pv.Summary
		}
		total.Create += sum.Create
		total.Update += sum.Update
		total.Replace += sum.Replace
		total.Delete += sum.Delete
		total.Same += sum.Same
		stacks = append(stacks, map[string]any{"name": pv.Name, "counts": counts(sum)})
		for _, c := range pv.Changes {
			changes = append(changes, map[string]any{
				"stack": pv.Name, "urn": c.URN, "type": c.Type, "op": c.Op,
				"properties": append([]string{}, c.Properties...),
			})
		}
		if pv.Source != nil {
			paths = append(paths, pv.Source.Paths...)
		}
	}
	slices.Sort(paths)
	rel := map[string]any{
		"name": p.Spec.Release, "commit": p.Status.Commit, "tag": "", "author": "", "subject": "",
		"paths": append([]string{}, slices.Compact(paths)...), "rollback": p.Spec.Rollback,
	}
	if release != nil {
		c := release.Spec.Commit
		rel["commit"], rel["tag"], rel["author"], rel["subject"] = c.SHA, c.Tag, c.Author, c.Subject
	}
	return Facts{vars: map[string]any{
		varChanges:   changes,
		varCounts:    counts(total),
		varStacks:    stacks,
		varRelease:   rel,
		varPromotion: map[string]string{"name": p.Name, "requestedBy": p.Spec.RequestedBy},
	}}
}

// counts is the counts variable of sum: each kind of change, and total,
// the resources that change.
func counts(sum promotionv1alpha1.ChangeSummary) map[string]int64 {
	return map[string]int64{
		"create":  int64(sum.Create),
		"update":  int64(sum.Update),
		"replace": int64(sum.Replace),
		"delete":  int64(sum.Delete),
		"same":    int64(sum.Same),
		"total":   int64(sum.Create) + int64(sum.Update) + int64(sum.Replace) + int64(sum.Delete),
	}
}
