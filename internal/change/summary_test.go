package change

import (
	"testing"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func TestDescribeFleet(t *testing.T) {
	sum := func(create, update, replace, del, same int32) *promotionv1alpha1.ChangeSummary {
		return &promotionv1alpha1.ChangeSummary{Create: create, Update: update, Replace: replace, Delete: del, Same: same}
	}
	repeat := func(n int, s *promotionv1alpha1.ChangeSummary) []*promotionv1alpha1.ChangeSummary {
		out := make([]*promotionv1alpha1.ChangeSummary, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := []struct {
		name      string
		summaries []*promotionv1alpha1.ChangeSummary
		want      string
	}{{
		name:      "one Stack",
		summaries: []*promotionv1alpha1.ChangeSummary{sum(0, 1, 0, 0, 4)},
		want:      "1 Stack: 1 with 1 to update",
	}, {
		name: "a fleet that changes alike, but for two that also replace: the unchanged counts differ and do not split groups",
		summaries: append(append(repeat(3, sum(0, 3, 0, 0, 10)), sum(0, 3, 1, 0, 9), sum(0, 3, 0, 0, 12)),
			sum(0, 3, 1, 0, 2)),
		want: "6 Stacks: 4 with 3 to update; 2 with 3 to update, 1 to replace",
	}, {
		name:      "unchanged and not previewed",
		summaries: []*promotionv1alpha1.ChangeSummary{nil, sum(0, 0, 0, 0, 3), sum(0, 0, 0, 0, 1), nil, nil},
		want:      "5 Stacks: 3 not previewed; 2 with no changes",
	}, {
		name:      "equal groups keep the order of their first Stack",
		summaries: []*promotionv1alpha1.ChangeSummary{sum(1, 0, 0, 0, 0), sum(0, 0, 0, 1, 0)},
		want:      "2 Stacks: 1 with 1 to create; 1 with 1 to delete",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DescribeFleet(tt.summaries); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
