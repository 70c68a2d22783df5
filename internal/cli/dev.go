package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/stackyard/stackyard/internal/devenv"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/runtime/local"
)

func init() {
	subcommands = append(subcommands, newDevCommand)
}

// devPassphrase encrypts the sample stack's secrets; a local, throwaway
// setup needs no real key.
const devPassphrase = "stackyard-dev" //nolint:gosec // the passphrase of stackyard dev's local sample, not a secret

// newDevCommand builds `stackyard dev`: a control plane, the operator with
// the local runtime and a sample Stack tracking a local git repository, on
// this machine, until interrupted.
func newDevCommand() *cobra.Command {
	var opts devenv.Options
	var logFile, dashboardAddr string
	var untilReady time.Duration
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run stackyard locally: control plane, operator and a sample Stack (state survives restarts)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Closing the terminal sends SIGHUP: it must stop the control
			// plane too, which runs in process groups of its own and would
			// otherwise outlive this process.
			ctx, stop := signal.NotifyContext(cmd.Context(), devStopSignals...)
			defer stop()
			return runDev(ctx, cmd.OutOrStdout(), opts, logFile, dashboardAddr, untilReady)
		},
	}
	cmd.Flags().StringVar(&opts.StateDir, "state-dir", ".stackyard", "directory for all state: control plane, workspaces, sample repository, Pulumi state")
	cmd.Flags().StringVar(&opts.BinDir, "bin-dir", "bin", "directory holding etcd, kube-apiserver, pulumi, the YAML host and the test provider (built by \"make tools\")")
	cmd.Flags().StringVar(&opts.CRDDir, "crd-dir", "config/crd/bases", "directory of the CRD manifests to install")
	cmd.Flags().StringVar(&opts.PolicyDir, "policy-dir", "config/policy", "directory of the admission policies to apply (empty: none)")
	cmd.Flags().StringVar(&opts.WebhookDir, "webhook-dir", "config/webhook", "directory of the operator's admission webhook configurations, which the operator then serves on loopback (empty: none)")
	cmd.Flags().StringVar(&dashboardAddr, "dashboard-bind-address", "127.0.0.1:8090", `web dashboard ("0" disables)`)
	cmd.Flags().StringVar(&logFile, "log-file", "", "operator log file (default: <state-dir>/operator.log)")
	cmd.Flags().DurationVar(&untilReady, "until-ready", 0, "stop with status 0 once the sample Stack is Ready and the sample pipeline's first promotion succeeded, or with an error naming what was missing after this long (0: run until interrupted)")
	cmd.AddCommand(newDevNotifyCommand())
	return cmd
}

// newDevNotifyCommand builds `stackyard dev notify`, which the sample
// repository's git hooks run: it tells the running `stackyard dev` of the
// new commit.
func newDevNotifyCommand() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Tell the running `stackyard dev` of a new commit in the sample repository (its git hooks run this)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devenv.Notify(cmd.Context(), stateDir)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", ".stackyard", "the state directory of the running \"stackyard dev\" to tell")
	return cmd
}

// devStopSignals end `stackyard dev` cleanly: Ctrl-C, kill, and the
// terminal closing.
var devStopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

func runDev(ctx context.Context, out io.Writer, opts devenv.Options, logFile, dashboardAddr string, untilReady time.Duration) error {
	var err error
	if opts.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
		return err
	}
	if opts.BinDir, err = filepath.Abs(opts.BinDir); err != nil {
		return err
	}
	if logFile == "" {
		logFile = filepath.Join(opts.StateDir, "operator.log")
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return err
	}
	logs, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logs.Close() }()
	ctrl.SetLogger(zap.New(zap.WriteTo(logs)))

	fmt.Fprintf(out, "Starting etcd and kube-apiserver (state in %s) ...\n", opts.StateDir)
	cp, err := devenv.StartControlPlane(opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the control plane ...")
		_ = cp.Stop()
	}()

	sample, err := devenv.PrepareSample(opts.StateDir)
	if err != nil {
		return fmt.Errorf("preparing the sample repository: %w", err)
	}
	git, err := devenv.StartGitServer(filepath.Dir(sample.RepoDir), filepath.Join(opts.StateDir, "git-port"))
	if err != nil {
		return err
	}
	defer func() { _ = git.Stop(context.Background()) }()

	receiverAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	opCtx, stopOperator := context.WithCancel(ctx)
	defer stopOperator()
	webhooks, err := devWebhooks(ctx, cp)
	if err != nil {
		return err
	}
	op, err := operator.New(opCtx, cp.Config, operator.Options{
		Webhook:       webhooks,
		ReceiverAddr:  receiverAddr,
		Runtime:       operator.RuntimeLocal,
		StateDir:      filepath.Join(opts.StateDir, "operator"),
		ToolDirs:      []string{opts.BinDir},
		AgentEnv:      map[string]string{"PULUMI_CONFIG_PASSPHRASE": devPassphrase},
		IdleAfter:     time.Minute,
		MaxAgents:     local.DefaultMaxAgents(),
		WarmAgents:    local.DefaultWarmAgents,
		DashboardAddr: dashboardAddr,
		DashboardURL:  devDashboardURL(dashboardAddr),
	})
	if err != nil {
		return err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- op.Start(opCtx) }()
	if webhooks.Addr != "" {
		// The webhooks fail closed: the sample's governed Stacks are
		// written only once the operator answers them.
		if err := waitServing(ctx, op.Manager.GetWebhookServer(), stopped); err != nil {
			return err
		}
	}

	c, err := client.New(cp.Config, client.Options{Scheme: op.Manager.GetScheme()})
	if err != nil {
		return err
	}
	repoURL := git.URL(devenv.SampleName + "/.git")
	if err := sample.EnsureStack(ctx, c, repoURL); err != nil {
		return fmt.Errorf("creating the sample Stack: %w", err)
	}
	if err := sample.EnsurePipeline(ctx, c, repoURL); err != nil {
		return fmt.Errorf("creating the sample pipeline: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := sample.EnsureReceiver(ctx, c, opts.StateDir, "http://"+receiverAddr, repoURL, self); err != nil {
		return fmt.Errorf("creating the sample Receiver: %w", err)
	}

	dashboard := ""
	if op.Dashboard != nil {
		tokenFile, err := devenv.WriteDashboardToken(ctx, c, opts.StateDir)
		if err != nil {
			return err
		}
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return err
		}
		dashboard = fmt.Sprintf("  dashboard:    http://%s (sign in with the token in %s)\n  login token:  %s\n",
			op.Dashboard.Addr(), tokenFile, strings.TrimSpace(string(token)))
	}
	printNextSteps(out, cp, sample, logFile, dashboard)
	if untilReady > 0 {
		return runUntilReady(ctx, out, c, untilReady, stopOperator, stopped)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nStopping the operator (workspace agents stop with it) ...")
		stopOperator()
		return <-stopped
	case err := <-stopped:
		return err
	}
}

// runUntilReady waits, at most limit, for the sample to be fully deployed,
// then stops the operator; the error says what was still missing.
func runUntilReady(ctx context.Context, out io.Writer, c client.Client, limit time.Duration, stopOperator func(), stopped <-chan error) error {
	waitCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- devenv.WaitForSample(waitCtx, c) }()
	var result error
	select {
	case result = <-waited:
		if result == nil {
			fmt.Fprintln(out, "\nThe sample Stack is Ready and the sample pipeline's first promotion succeeded.")
		} else if ctx.Err() == nil {
			result = fmt.Errorf("the sample was not ready within %s: %w", limit, result)
		}
	case err := <-stopped:
		if err == nil {
			err = errors.New("the operator stopped")
		}
		return fmt.Errorf("before the sample was ready: %w", err)
	}
	fmt.Fprintln(out, "Stopping the operator (workspace agents stop with it) ...")
	stopOperator()
	if err := <-stopped; err != nil && result == nil {
		result = err
	}
	return result
}

func printNextSteps(out io.Writer, cp *devenv.ControlPlane, s *devenv.Sample, logFile, dashboard string) {
	fmt.Fprintf(out, `
stackyard is running.
  API server:   %s
  kubeconfig:   %s
  operator log: %s
  sample repo:  %s (branch main)
%s
The Stack "sample" deploys the program in the sample repository; its
resource is the file %s. The pipeline "sample" promotes each new commit
to the Stack sample-dev, then, once someone approves, to sample-prod:
open the dashboard to watch it and approve.

Try:
  export KUBECONFIG=%s
  bin/kubectl get stacks,workspaces,updates
  bin/kubectl get stack sample -o yaml          # status: conditions, lastUpdate, outputs, history
  bin/kubectl wait stack/sample --for=condition=Ready --timeout=5m

Then change the program and watch the Stack update at once (the sample
repository's git hooks tell the operator's Receiver of each commit):
  cd %s && sed -i 's/length: 6/length: 8/' Pulumi.yaml && git commit -qam "longer suffix"

Press Ctrl-C to stop everything; a later 'make dev' carries on where this one stopped.
`, cp.Config.Host, cp.KubeconfigPath, logFile, s.RepoDir, dashboard, s.OutputFile, cp.KubeconfigPath, s.RepoDir)
}

// devDashboardURL is the dashboard's address for Update permalinks, when the
// port is fixed.
func devDashboardURL(addr string) string {
	if addr == "" || addr == "0" || strings.HasSuffix(addr, ":0") {
		return ""
	}
	return "http://" + addr
}

// freeLoopbackAddr is a free port on 127.0.0.1, for the Receivers'
// endpoint of `stackyard dev`.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// devWebhookSecret keeps the dev operator's webhook CA and serving
// certificate, as the chart's operator keeps its own.
var devWebhookSecret = types.NamespacedName{Namespace: "stackyard-system", Name: "stackyard-webhook-tls"}

// devWebhooks is how the dev operator serves the webhook configurations
// the control plane installed (none when it installed none): on their
// loopback address, with a certificate it keeps in devWebhookSecret and
// whose CA it sets in both configurations.
func devWebhooks(ctx context.Context, cp *devenv.ControlPlane) (operator.WebhookOptions, error) {
	if cp.Webhooks == nil {
		return operator.WebhookOptions{}, nil
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return operator.WebhookOptions{}, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devWebhookSecret.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return operator.WebhookOptions{}, fmt.Errorf("creating namespace %s for the webhook's certificate: %w", ns.Name, err)
	}
	return operator.WebhookOptions{
		Addr: cp.Webhooks.Addr, Secret: devWebhookSecret, Hosts: []string{cp.Webhooks.Host},
		Configuration: "stackyard-edit-stamp", ValidatingConfiguration: "stackyard-read-check",
	}, nil
}

// waitServing waits, up to a minute, for srv to serve, or for the
// operator to stop (stopped).
func waitServing(ctx context.Context, srv webhook.Server, stopped <-chan error) error {
	check := srv.StartedChecker()
	deadline := time.Now().Add(time.Minute)
	for check(&http.Request{}) != nil {
		select {
		case err := <-stopped:
			return fmt.Errorf("the operator stopped before serving its webhooks: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("the operator did not serve its admission webhooks within a minute")
		}
	}
	return nil
}
