package promotion

import (
	"context"
	"fmt"
	"time"

	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/schedule"
)

// ReasonOutsideWindow is the reason of the wait of a promotion asked for
// outside its stage's promotion windows.
const ReasonOutsideWindow = "OutsideWindow"

// noWindowWait is how long a promotion whose stage's windows never open
// again waits before it looks again by itself; a change of the stage wakes
// it sooner.
const noWindowWait = time.Hour

// reconcileWindow keeps a Pending promotion waiting while its stage's
// promotion windows are closed, until the next one opens. A window the
// operator cannot read refuses the promotion, naming it.
func (s *session) reconcileWindow(context.Context) (sreconcile.Result, error) {
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	windows, err := change.Windows(&s.stage.Spec)
	if err != nil {
		return s.abort("spec.stage: Stage %q: %v", s.stage.Name, err)
	}
	opens, ok := schedule.OpenAt(windows, s.now)
	switch {
	case !ok:
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonOutsideWindow,
			fmt.Errorf("waiting for promotion window: none of stage %s opens again", s.stage.Name), noWindowWait)
	case opens.After(s.now):
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonOutsideWindow,
			fmt.Errorf("waiting for promotion window: stage %s's next opens at %s", s.stage.Name, opens.UTC().Format(time.RFC3339)),
			opens.Sub(s.now)+time.Second)
	}
	return sreconcile.ResultEmpty, nil
}
