package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/agent/cache"
	"github.com/stackyard/stackyard/internal/agent/server"
)

// agentTokenEnv is the environment variable that carries the static token
// when --token-file is not given.
const agentTokenEnv = "STACKYARD_AGENT_TOKEN"

// agentSubcommands lists the constructors of `stackyard agent`'s children.
// Files in this package append to it from init functions, as with
// subcommands for the root.
var agentSubcommands []func() *cobra.Command

func init() {
	subcommands = append(subcommands, agentCommand)
	agentSubcommands = append(agentSubcommands, agentServeCommand)
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

// agentServeOptions are the flags of `stackyard agent serve`.
type agentServeOptions struct {
	workspace   string
	listen      string
	tokenFile   string
	noAuth      bool
	authMode    string
	wsNamespace string
	wsName      string
	pulumi      string
	gracePeriod time.Duration
	verbose     bool
	cacheDir    string
	cacheMax    int64
}

// agentServeCommand returns `stackyard agent serve`.
func agentServeCommand() *cobra.Command {
	o := &agentServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent's gRPC API over a Pulumi project directory",
		Long: "Serve the agent's gRPC API over the Pulumi project in --workspace.\n\n" +
			"The first line on stdout is the address the server listens on, so a parent process can\n" +
			"start it with --listen 127.0.0.1:0 and read the port. Every call must carry the bearer\n" +
			"token read from --token-file or $" + agentTokenEnv + " (unless --no-auth).\n" +
			"SIGTERM or SIGINT cancels a running operation (the CLI gets SIGINT, then SIGKILL after\n" +
			"--grace-period) and stops the server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgentServe(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.workspace, "workspace", "", "the Pulumi project directory (holding Pulumi.yaml)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "the TCP address to listen on")
	f.StringVar(&o.tokenFile, "token-file", "", "a file holding the bearer token callers must present (default $"+agentTokenEnv+")")
	f.BoolVar(&o.noAuth, "no-auth", false, "accept calls without a token (only for local development)")
	f.StringVar(&o.authMode, "auth", authStatic, "how callers are authenticated: "+authStatic+" (the token of --token-file), "+
		authKubernetes+" (a service account token for this workspace's audience, checked with TokenReview and SubjectAccessReview)")
	f.StringVar(&o.wsNamespace, "workspace-namespace", "", "the namespace of the Workspace served (with --auth "+authKubernetes+")")
	f.StringVar(&o.wsName, "workspace-name", "", "the name of the Workspace served (with --auth "+authKubernetes+")")
	f.StringVar(&o.pulumi, "pulumi", "", "the pulumi binary (default: pulumi on PATH)")
	f.DurationVar(&o.gracePeriod, "grace-period", server.DefaultGracePeriod, "how long a cancelled pulumi gets between SIGINT and SIGKILL")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log more detail")
	f.StringVar(&o.cacheDir, "cache-dir", "", "a directory that outlives the agent, where the plugins the CLI installs are kept (PULUMI_HOME/plugins links there)")
	f.Int64Var(&o.cacheMax, "cache-max-bytes", 0, "with --cache-dir: remove the oldest plugins at start until the cache holds at most this many bytes (0: no bound)")
	_ = cmd.MarkFlagRequired("workspace")
	return cmd
}

// runAgentServe starts the server and runs it until SIGTERM or SIGINT.
func runAgentServe(ctx context.Context, cmd *cobra.Command, o *agentServeOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.Level(-1)
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))

	if o.cacheDir != "" {
		useCache(log, o.cacheDir, o.cacheMax)
	}
	grpcOpts, err := agentAuthOptions(o, log)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Options{
		WorkDir:     o.workspace,
		PulumiPath:  o.pulumi,
		GracePeriod: o.gracePeriod,
		Log:         log,
	})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(cmd.OutOrStdout(), lis.Addr().String()); err != nil {
		_ = lis.Close()
		return err
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	g := server.NewGRPCServer(srv, grpcOpts...)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	log.Info("agent serving", "address", lis.Addr().String(), "workspace", o.workspace)

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("stopping: cancelling running operations")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), o.gracePeriod+15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Info("operations did not stop in time", "error", err.Error())
	}
	stopped := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		g.Stop()
	}
	log.Info("stopped")
	return nil
}

// Authentication modes of `agent serve --auth`.
const (
	authStatic     = "static"
	authKubernetes = "kubernetes"
)

// agentAuthOptions returns the server options that install the
// authentication --auth asks for.
func agentAuthOptions(o *agentServeOptions, log logr.Logger) ([]grpc.ServerOption, error) {
	if o.noAuth {
		return nil, nil
	}
	var a auth.Authorizer
	switch o.authMode {
	case authStatic:
		token, err := staticToken(o)
		if err != nil {
			return nil, err
		}
		a = auth.NewStaticToken(token)
	case authKubernetes:
		k, err := kubernetesAuthorizer(o, log)
		if err != nil {
			return nil, err
		}
		a = k
	default:
		return nil, fmt.Errorf("--auth %q: want %s or %s", o.authMode, authStatic, authKubernetes)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(auth.UnaryInterceptor(a)),
		grpc.ChainStreamInterceptor(auth.StreamInterceptor(a)),
	}, nil
}

// staticToken reads the token from --token-file or the environment.
func staticToken(o *agentServeOptions) (string, error) {
	token := os.Getenv(agentTokenEnv)
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("read --token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return "", errors.New("no token: pass --token-file or set $" + agentTokenEnv + " (or --no-auth for local development)")
	}
	return token, nil
}

// kubernetesAuthorizer builds the TokenReview authorizer for the Workspace
// named by the flags, reaching the API server as the pod's service account
// (or through $KUBECONFIG outside a cluster).
func kubernetesAuthorizer(o *agentServeOptions, log logr.Logger) (auth.Authorizer, error) {
	if o.wsNamespace == "" || o.wsName == "" {
		return nil, errors.New("--auth " + authKubernetes + " needs --workspace-namespace and --workspace-name")
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("--auth %s: finding the API server: %w", authKubernetes, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return auth.NewKubernetes(auth.KubernetesConfig{
		Client:    cs,
		Namespace: o.wsNamespace,
		Name:      o.wsName,
		Log:       log.WithName("auth"),
	}), nil
}

// useCache points PULUMI_HOME/plugins at the cache directory and keeps
// the cache within maxBytes. The cache only saves time: when it cannot be
// used the agent says why and goes on without it.
func useCache(log logr.Logger, dir string, maxBytes int64) {
	home := os.Getenv("PULUMI_HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			log.Info("the plugin cache is not used: no PULUMI_HOME and no home directory", "cache", dir)
			return
		}
		home = filepath.Join(h, ".pulumi")
	}
	if err := cache.Link(home, dir); err != nil {
		log.Info("the plugin cache is not used", "cache", dir, "reason", err.Error())
		return
	}
	removed, kept, err := cache.Prune(dir, maxBytes)
	for _, e := range removed {
		log.Info("removed from the cache to keep it within its size", "entry", e.Name, "bytes", e.Size, "maxBytes", maxBytes)
	}
	if err != nil {
		log.Info("could not prune the plugin cache", "cache", dir, "reason", err.Error())
	}
	names := make([]string, len(kept))
	for i, e := range kept {
		names[i] = e.Name
	}
	log.Info("plugin cache in use", "cache", dir, "plugins", names)
}
