// Package opsuite sets up a test suite that runs the whole operator in the
// test process against a real API server: the control plane (with the
// admission policies of config/policy), Pulumi isolated in a temporary
// directory, the stackyard agent built from this tree, and the operator as
// its own ServiceAccount bound to the generated RBAC only, with the local
// runtime and the pinned tools. It lives apart from test/testenv because
// it imports the operator, which packages testenv serves import too.
package opsuite

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zapcore"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/stackyard/stackyard/internal/editstamp"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/readcheck"
	"github.com/stackyard/stackyard/test/testenv"
)

// Options say what a suite needs.
type Options struct {
	// Name prefixes the suite's temporary directory.
	Name string
	// Passphrase encrypts the stacks' secrets; the agents get it as
	// PULUMI_CONFIG_PASSPHRASE.
	Passphrase string
	// Required are binaries of bin/ the suite needs besides the control
	// plane and Pulumi's.
	Required []string
	// AddToScheme registers the API types the tests use.
	AddToScheme []func(*k8sruntime.Scheme) error
	// FluxCRDs installs Flux's source CRDs too.
	FluxCRDs bool
	// ExtraCRDDirs are further directories of CRDs to install (Argo CD's,
	// in bin/crds/argocd).
	ExtraCRDDirs []string
	// Webhooks installs the operator's admission webhooks
	// (config/webhook: edit-stamp, which records who edited a governed
	// Stack, and read-check) and serves them in this process with the
	// operator's handlers, as the operator serves them in a cluster.
	Webhooks bool
	// Receiver serves the receiver endpoint on a free loopback port.
	Receiver bool
	// Logs receives everything the operator logs; STACKYARD_TEST_LOG=1
	// also prints it.
	Logs *testenv.SyncBuffer
	// Operator holds the operator's own settings (intervals, URLs). The
	// runtime, state directory, agent, tools, agent environment and
	// receiver address are filled in.
	Operator operator.Options
}

// Suite is a running suite.
type Suite struct {
	// Env is the control plane, with an administrator's client.
	Env *testenv.Env
	// Dir is the suite's temporary directory.
	Dir string
	// ReceiverURL is the operator's receiver endpoint, when Options.Receiver.
	ReceiverURL string
}

// Run sets the suite up, calls ready (which may set the package's
// variables and do more set-up) and runs the tests, then tears everything
// down. It returns the exit code for os.Exit; a failure of the set-up is
// printed.
func Run(m *testing.M, opts Options, ready func(*Suite) error) int {
	code, err := run(m, opts, ready)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	return code
}

// run is Run, returning m.Run's code, or the error that stopped it.
func run(m *testing.M, opts Options, ready func(*Suite) error) (code int, err error) {
	required := append([]string{"etcd", "kube-apiserver"}, testenv.PulumiBinaries...)
	if opts.FluxCRDs {
		required = append(required, "crds/flux/.version")
	}
	if err := testenv.RequireBinaries(append(required, opts.Required...)...); err != nil {
		return 0, err
	}
	s := &Suite{}
	if s.Dir, err = os.MkdirTemp("", opts.Name+"-"); err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(s.Dir) }()
	if err := testenv.IsolatePulumi(s.Dir, opts.Passphrase); err != nil {
		return 0, err
	}
	agentBin, err := testenv.BuildStackyard(s.Dir)
	if err != nil {
		return 0, err
	}
	out := io.Discard
	if opts.Logs != nil {
		out = opts.Logs
	}
	if os.Getenv("STACKYARD_TEST_LOG") != "" {
		out = io.MultiWriter(out, os.Stderr)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(out), zap.Level(zapcore.Level(-4))))
	envOpts := testenv.Options{AddToScheme: opts.AddToScheme}
	if opts.FluxCRDs {
		envOpts.ExtraCRDDirs = []string{filepath.Join(testenv.BinDir(), "crds", "flux")}
	}
	envOpts.ExtraCRDDirs = append(envOpts.ExtraCRDDirs, opts.ExtraCRDDirs...)
	if opts.Webhooks {
		envOpts.Webhooks = []string{
			filepath.Join(testenv.RepoRoot(), "config", "webhook", "edit-stamp.yaml"),
			filepath.Join(testenv.RepoRoot(), "config", "webhook", "read-check.yaml"),
		}
	}
	if s.Env, err = testenv.Start(envOpts); err != nil {
		return 0, err
	}
	defer func() { _ = s.Env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if opts.Webhooks {
		err := s.Env.ServeWebhooks(ctx, func(srv webhook.Server) {
			editstamp.Register(srv, s.Env.Scheme)
			readcheck.Register(srv, s.Env.Scheme, s.Env.Client)
		})
		if err != nil {
			return 0, err
		}
	}
	if err := s.Env.InstallPolicies(ctx); err != nil {
		return 0, err
	}
	cfg, err := s.Env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		return 0, err
	}
	o := opts.Operator
	o.Runtime, o.StateDir, o.AgentPath = operator.RuntimeLocal, filepath.Join(s.Dir, "operator"), agentBin
	o.ToolDirs = []string{testenv.BinDir()}
	o.AgentEnv = map[string]string{"PULUMI_CONFIG_PASSPHRASE": opts.Passphrase}
	if opts.Receiver {
		if o.ReceiverAddr, err = freeAddr(); err != nil {
			return 0, err
		}
		s.ReceiverURL = "http://" + o.ReceiverAddr
	}
	op, err := operator.New(ctx, cfg, o)
	if err != nil {
		return 0, fmt.Errorf("assembling the operator: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	if ready != nil {
		if err := ready(s); err != nil {
			cancel()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, "the operator stopped:", err)
			}
			return 0, err
		}
	}
	code = m.Run()
	cancel()
	if err := <-done; err != nil {
		return 0, fmt.Errorf("the operator stopped: %w", err)
	}
	return code, nil
}

// freeAddr is a loopback address whose port is free now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
