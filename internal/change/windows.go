package change

import (
	"fmt"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/schedule"
)

// Windows reads spec.promotionWindows; an error names the window's field.
func Windows(spec *promotionv1alpha1.StageSpec) ([]schedule.Window, error) {
	windows := make([]schedule.Window, 0, len(spec.PromotionWindows))
	for i, pw := range spec.PromotionWindows {
		rule, err := schedule.ParseRule(pw.RRule)
		if err != nil {
			return nil, fmt.Errorf("spec.promotionWindows[%d].rrule: %w", i, err)
		}
		kind := schedule.Allow
		if pw.Kind == promotionv1alpha1.Deny {
			kind = schedule.Deny
		}
		w, err := schedule.NewWindow(kind, rule, pw.DTStart.Time, pw.DTEnd.Time)
		if err != nil {
			return nil, fmt.Errorf("spec.promotionWindows[%d]: %w", i, err)
		}
		windows = append(windows, w)
	}
	return windows, nil
}
