package pipeline

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// validateSpec checks what the CRD schema cannot: that the Pipeline's
// name fits in a label and that spec.git.semverConstraint parses. Either
// mistake stalls the Pipeline, naming the field, before git is asked.
func (r *Reconciler) validateSpec(s *session) (sreconcile.Result, error) {
	if n := len(s.pipeline.Name); n > validation.LabelValueMaxLength {
		// The name labels the Releases, and a label value is shorter than
		// an object name.
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason,
			fmt.Errorf("metadata.name: %d characters, but a Pipeline's name labels its Releases and may have at most %d", n, validation.LabelValueMaxLength))
	}
	sel, err := newSelection(&s.pipeline.Spec.Git)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, err)
	}
	s.sel = sel
	return sreconcile.ResultEmpty, nil
}
