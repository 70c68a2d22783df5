package operator

import (
	"context"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/go-logr/logr"
)

// ShutdownTimeout bounds the operator's stop: its operations are
// cancelled (the CLI saves its state), its controllers and caches stop,
// and what has not stopped by then is abandoned. It stays below the 30
// seconds Kubernetes gives a pod (the chart's
// terminationGracePeriodSeconds), so the operator exits on its own, with
// its lease released, instead of being killed.
const ShutdownTimeout = 25 * time.Second

// SlowShutdownReport is how long into a stop the operator writes, to
// stderr, the stacks of its goroutines: a stop that takes this long waits
// on something, and the stacks name it.
const SlowShutdownReport = 15 * time.Second

// SlowShutdownMessage opens that report in the log.
const SlowShutdownMessage = "the operator is still stopping; the goroutines it waits on follow"

// Start runs the manager until ctx ends and then until it has stopped,
// ShutdownTimeout at most.
func (o *Operator) Start(ctx context.Context) error {
	stopped := make(chan struct{})
	defer close(stopped)
	go reportSlowShutdown(ctx, stopped, SlowShutdownReport, o.Manager.GetLogger(), os.Stderr)
	return o.Manager.Start(ctx)
}

// reportSlowShutdown waits for ctx to end and then for stopped; if after
// bound it is not closed, it logs SlowShutdownMessage and writes every
// goroutine's stack to w, the same stacks counted once.
func reportSlowShutdown(ctx context.Context, stopped <-chan struct{}, bound time.Duration, log logr.Logger, w io.Writer) {
	select {
	case <-stopped:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		log.Error(nil, SlowShutdownMessage, "after", bound)
		_ = pprof.Lookup("goroutine").WriteTo(w, 1)
	}
}
