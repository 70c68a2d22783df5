package operator

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestReportSlowShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bound    time.Duration
		stops    bool // whether stopped closes after ctx ends
		wantDump bool
	}{
		{name: "a stop within the bound says nothing", bound: time.Hour, stops: true},
		{name: "a slow stop writes the stacks", bound: 50 * time.Millisecond, wantDump: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			var out bytes.Buffer
			done := make(chan struct{})
			go func() {
				reportSlowShutdown(ctx, stopped, tc.bound, logr.Discard(), &out)
				close(done)
			}()
			cancel()
			if tc.stops {
				close(stopped)
			}
			<-done
			dumped := strings.Contains(out.String(), "goroutine profile:")
			if dumped != tc.wantDump {
				t.Errorf("dumped = %v, want %v; wrote:\n%.400s", dumped, tc.wantDump, out.String())
			}
			if tc.wantDump && !strings.Contains(out.String(), "reportSlowShutdown") {
				t.Errorf("the dump lacks the reporting goroutine itself:\n%.400s", out.String())
			}
		})
	}
}
