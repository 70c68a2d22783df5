package cli

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/agent/auth/kubereviews"
	"github.com/stackyard/stackyard/internal/agent/serve"
)

// agentSubcommands lists the constructors of `stackyard agent`'s children.
// Files in this package append to it from init functions, as with
// subcommands for the root.
var agentSubcommands []func() *cobra.Command

func init() {
	subcommands = append(subcommands, agentCommand, leanServeCommand)
	agentSubcommands = append(agentSubcommands, func() *cobra.Command { return serve.Command(kubernetesAuthorizer) })
}

// leanServeCommand returns `stackyard serve`, hidden: the lean agent's
// command (`stackyard-agent serve`) in this binary. A workspace pod runs
// `stackyard-agent serve`; where the init image has no stackyard-agent of
// its build, `agent init --copy-agent` copies stackyard in its place, and
// this command serves. Its --auth kubernetes is the lean agent's too
// (serve.InClusterAuth): the pod's service account, never a kubeconfig
// that a Workspace's environment may name for its program.
func leanServeCommand() *cobra.Command {
	cmd := serve.Command(serve.InClusterAuth)
	cmd.Hidden = true
	return cmd
}

// agentCommand returns `stackyard agent`, the parent of the commands that
// run inside a workspace (init, serve).
func agentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the workspace agent that drives the Pulumi engine for the operator",
		Args:  cobra.NoArgs,
	}
	for _, add := range agentSubcommands {
		cmd.AddCommand(add())
	}
	return cmd
}

// kubernetesAuthorizer builds the TokenReview authorizer of `agent serve
// --auth kubernetes` for the Workspace namespace/name, reaching the API
// server as the pod's service account (or through $KUBECONFIG outside a
// cluster).
func kubernetesAuthorizer(namespace, name string, log logr.Logger) (auth.Authorizer, error) {
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("--auth %s: finding the API server: %w", serve.AuthKubernetes, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return auth.NewKubernetes(auth.KubernetesConfig{
		Client:    kubereviews.For(cs),
		Namespace: namespace,
		Name:      name,
		Log:       log,
	}), nil
}
