package stage

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// TestTooManyStacks: a stage stalls, with a reason of its own, only past
// the Stacks a promotion records.
func TestTooManyStacks(t *testing.T) {
	g := NewWithT(t)
	g.Expect(tooManyStacks(0)).To(Succeed())
	g.Expect(tooManyStacks(change.MaxMembers)).To(Succeed())
	err := tooManyStacks(change.MaxMembers + 2)
	var stall *sreconcile.Stalling
	g.Expect(errors.As(err, &stall)).To(BeTrue(), "%v", err)
	g.Expect(sreconcile.Reason(err)).To(Equal(promotionv1alpha1.StageReasonTooManyStacks))
	g.Expect(err.Error()).To(ContainSubstring("the stage deploys 1002 Stacks, more than the 1000 a promotion records"))
}
