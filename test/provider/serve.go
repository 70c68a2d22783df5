package provider

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
)

// Handle is a running provider server.
type Handle struct {
	// Port is the TCP port on 127.0.0.1 the server listens on.
	Port int
	// Provider is the service being served.
	Provider *Provider
	// Done receives the server's final error (nil after a clean stop) and is
	// then closed.
	Done <-chan error

	stop chan bool
}

// Serve starts a gRPC server for a new Provider on a free port of
// 127.0.0.1 and returns at once. Tests use it to talk to the provider
// in-process; Main uses it to run the plugin.
func Serve() (*Handle, error) {
	p := New()
	stop := make(chan bool, 1)
	h, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stop,
		Init: func(s *grpc.Server) error {
			pulumirpc.RegisterResourceProviderServer(s, p)
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("serving the %s provider: %w", Name, err)
	}
	return &Handle{Port: h.Port, Provider: p, Done: h.Done, stop: stop}, nil
}

// Shutdown cancels running operations and stops the server once the calls
// in flight have returned; it does not wait for that.
func (h *Handle) Shutdown() {
	h.Provider.Stop()
	select {
	case h.stop <- true:
	default:
	}
}

// Main runs the provider as a Pulumi plugin process. The engine starts the
// binary with optional flags (--logtostderr, -v=N, --tracing URL) and the
// engine's address, none of which this provider needs, so it ignores its
// arguments. As the protocol requires, the port is the first line written to
// stdout. The process ends when told to (SIGINT or SIGTERM), and also when its
// parent goes away: an engine killed with SIGKILL cannot kill its plugins,
// and tests that do that must not leave a provider behind (unless
// StubbornEnv asks it to stay).
func Main(stdout io.Writer) error {
	h, err := Serve()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%d\n", h.Port); err != nil {
		h.Shutdown()
		return fmt.Errorf("announcing the port: %w", err)
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	var orphaned <-chan struct{} // nil: never, for a stubborn provider
	if !stubborn() {
		orphaned = watchParent(time.Second)
	}
	go func() {
		select {
		case <-signals:
		case <-orphaned:
		}
		h.Shutdown()
		// Calls in flight end promptly once the provider is stopped; if
		// one does not, do not hang around for it.
		time.Sleep(5 * time.Second)
		os.Exit(1)
	}()
	return <-h.Done
}

// watchParent returns a channel that is closed once this process's parent
// changes (the parent exited and the process was re-parented), checking every
// interval.
func watchParent(interval time.Duration) <-chan struct{} {
	gone := make(chan struct{})
	parent := os.Getppid()
	go func() {
		for os.Getppid() == parent {
			time.Sleep(interval)
		}
		close(gone)
	}()
	return gone
}
