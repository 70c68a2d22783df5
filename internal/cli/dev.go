package cli

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/devenv"
)

func init() {
	subcommands = append(subcommands, newDevCommand)
}

// newDevCommand builds `stackyard dev`: everything stackyard needs, on this
// machine, until interrupted.
func newDevCommand() *cobra.Command {
	var opts devenv.Options
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local control plane with stackyard's CRDs (state survives restarts)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDev(ctx, cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.StateDir, "state-dir", ".stackyard", "directory for the control plane's state and the kubeconfig")
	cmd.Flags().StringVar(&opts.BinDir, "bin-dir", "bin", "directory holding etcd and kube-apiserver (built by `make tools`)")
	cmd.Flags().StringVar(&opts.CRDDir, "crd-dir", "config/crd/bases", "directory of the CRD manifests to install")
	return cmd
}

func runDev(ctx context.Context, cmd *cobra.Command, opts devenv.Options) error {
	out := cmd.OutOrStdout()
	fmt.Fprintln(out, "Starting etcd and kube-apiserver (state in", opts.StateDir+") ...")
	cp, err := devenv.StartControlPlane(opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the control plane ...")
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "stopping:", err)
		}
	}()
	crds, err := cp.ServedCRDs(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "API server: %s\nKubeconfig: %s\n\nCRDs served (* = storage version):\n", cp.Config.Host, cp.KubeconfigPath)
	for _, line := range crds {
		fmt.Fprintln(out, "  "+line)
	}
	fmt.Fprintf(out, "\nTry:\n  export KUBECONFIG=%s\n  bin/kubectl get crds\n  bin/kubectl explain stack.spec\n\nPress Ctrl-C to stop.\n", cp.KubeconfigPath)
	<-ctx.Done()
	return nil
}
