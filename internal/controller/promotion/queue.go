package promotion

import (
	"context"
	"fmt"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonQueued is the reason of the wait of a promotion queued behind the
// one that runs.
const ReasonQueued = "Queued"

// queueWait is how long a queued promotion waits before it looks again by
// itself; the end of the running promotion wakes it sooner.
const queueWait = 5 * time.Minute

// Turn is what the queue rule says of one Pending promotion.
type Turn struct {
	// SupersededBy names the newer Pending promotion that runs instead.
	SupersededBy string
	// WaitFor names the Running promotion it waits for.
	WaitFor string
}

// Queue applies the queue rule to the Pending promotion self, of a stage
// whose promotions are all: superseded by the newest Pending one when that
// is not self, else waiting for the Running one, if any, else its turn
// (the zero Turn).
func Queue(self *promotionv1alpha1.Promotion, all []promotionv1alpha1.Promotion) Turn {
	var t Turn
	newest := self
	for i := range all {
		p := &all[i]
		pending := p.Status.Phase == promotionv1alpha1.PromotionPending || p.Status.Phase == ""
		switch {
		case p.Name == self.Name:
		case p.Status.Phase == promotionv1alpha1.PromotionRunning:
			t.WaitFor = p.Name
		case pending && change.CompareAge(p, newest) > 0:
			newest = p
		}
	}
	if newest != self {
		t.SupersededBy = newest.Name
	}
	return t
}

// reconcileQueue applies the queue rule to a Pending promotion, on a live
// list of the stage's promotions: an older one is Aborted as superseded,
// the newest waits while another runs.
func (s *session) reconcileQueue(ctx context.Context) (sreconcile.Result, error) {
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	var list promotionv1alpha1.PromotionList
	if err := s.r.APIReader.List(ctx, &list, client.InNamespace(s.p.Namespace), client.MatchingFields{change.PromotionStageIndex: s.p.Spec.Stage}); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("listing the promotions of stage %q: %w", s.p.Spec.Stage, err))
	}
	switch t := Queue(s.p, list.Items); {
	case t.SupersededBy != "":
		return s.abort("superseded by %s", t.SupersededBy)
	case t.WaitFor != "":
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonQueued, fmt.Errorf("waiting for promotion %s to finish", t.WaitFor), queueWait)
	}
	return sreconcile.ResultEmpty, nil
}
