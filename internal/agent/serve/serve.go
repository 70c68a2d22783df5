// Package serve is the agent's server command: the gRPC API of
// internal/agent/server over one Pulumi project directory, behind a bearer
// token. Both binaries run it: stackyard as `stackyard agent serve`, and
// the lean stackyard-agent as `stackyard-agent serve`, which is what the
// local runtime's agents (one start per update in a burst) and workspace
// pods (--auth kubernetes) run: it leaves out the operator's packages,
// whose initialisation was half of an agent's start.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/agent/auth/apireviews"
	"github.com/stackyard/stackyard/internal/agent/bind"
	"github.com/stackyard/stackyard/internal/agent/cache"
	"github.com/stackyard/stackyard/internal/agent/server"
)

// TokenEnv is the environment variable that carries the static token when
// --token-file is not given.
const TokenEnv = "STACKYARD_AGENT_TOKEN"

// options are the flags of serve.
type options struct {
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
	awaitSpec   bool
	kube        KubernetesAuth
}

// KubernetesAuth builds the authorizer of --auth kubernetes: the
// TokenReview and SubjectAccessReview policy for the Workspace
// namespace/name.
type KubernetesAuth func(namespace, name string, log logr.Logger) (auth.Authorizer, error)

// InClusterAuth is the KubernetesAuth of a pod, without client-go: the
// reviews go to the API server over HTTPS as the pod's service account
// (internal/agent/auth/apireviews). The lean stackyard-agent uses it.
func InClusterAuth(namespace, name string, log logr.Logger) (auth.Authorizer, error) {
	cfg, err := apireviews.InCluster("")
	if err != nil {
		return nil, fmt.Errorf("--auth %s: %w", AuthKubernetes, err)
	}
	reviews, err := apireviews.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--auth %s: %w", AuthKubernetes, err)
	}
	return auth.NewKubernetes(auth.KubernetesConfig{Client: reviews, Namespace: namespace, Name: name, Log: log}), nil
}

// Command returns the serve command. kube builds the authorizer of --auth
// kubernetes (InClusterAuth, or one on a clientset); nil means this binary
// has none, and --auth kubernetes fails with an error that names the
// binary that has one.
func Command(kube KubernetesAuth) *cobra.Command {
	o := &options{kube: kube}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent's gRPC API over a Pulumi project directory",
		Long: "Serve the agent's gRPC API over the Pulumi project in --workspace.\n\n" +
			"The first line on stdout is the address the server listens on, so a parent process can\n" +
			"start it with --listen 127.0.0.1:0 and read the port. Every call must carry the bearer\n" +
			"token read from --token-file or $" + TokenEnv + " (unless --no-auth).\n" +
			"SIGTERM or SIGINT cancels a running operation (the CLI gets SIGINT, then SIGKILL after\n" +
			"--grace-period) and stops the server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.workspace, "workspace", "", "the Pulumi project directory (holding Pulumi.yaml)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "the TCP address to listen on")
	f.StringVar(&o.tokenFile, "token-file", "", "a file holding the bearer token callers must present (default $"+TokenEnv+")")
	f.BoolVar(&o.noAuth, "no-auth", false, "accept calls without a token (only for local development)")
	f.StringVar(&o.authMode, "auth", AuthStatic, "how callers are authenticated: "+AuthStatic+" (the token of --token-file), "+
		AuthKubernetes+" (a service account token for this workspace's audience, checked with TokenReview and SubjectAccessReview)")
	f.StringVar(&o.wsNamespace, "workspace-namespace", "", "the namespace of the Workspace served (with --auth "+AuthKubernetes+")")
	f.StringVar(&o.wsName, "workspace-name", "", "the name of the Workspace served (with --auth "+AuthKubernetes+")")
	f.StringVar(&o.pulumi, "pulumi", "", "the pulumi binary (default: pulumi on PATH)")
	f.DurationVar(&o.gracePeriod, "grace-period", server.DefaultGracePeriod, "how long a cancelled pulumi gets between SIGINT and SIGKILL")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log more detail")
	f.StringVar(&o.cacheDir, "cache-dir", "", "a directory that outlives the agent, where the plugins the CLI installs are kept (PULUMI_HOME/plugins links there)")
	f.Int64Var(&o.cacheMax, "cache-max-bytes", 0, "with --cache-dir: remove the oldest plugins at start until the cache holds at most this many bytes (0: no bound)")
	f.BoolVar(&o.awaitSpec, "await-spec", false, "start warm: read the workspace, token file, verbosity, working directory and whole environment "+
		"from stdin (internal/agent/bind), then serve; the local runtime's pre-started agents")
	return cmd
}

// awaitSpec reads the Spec of a pre-started agent from stdin and applies
// it. It returns false, with no error, when stdin closes empty: the
// runtime no longer needs this agent.
func awaitSpec(cmd *cobra.Command, o *options) (bool, error) {
	for _, name := range []string{"workspace", "token-file", "verbose"} {
		if cmd.Flags().Changed(name) {
			return false, fmt.Errorf("--await-spec reads --%s from its spec; do not pass both", name)
		}
	}
	spec, err := bind.Read(cmd.InOrStdin())
	if errors.Is(err, bind.ErrNoSpec) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := spec.Apply(); err != nil {
		return false, err
	}
	o.workspace, o.tokenFile, o.verbose = spec.Workspace, spec.TokenFile, spec.Verbose
	return true, nil
}

// run starts the server and runs it until SIGTERM or SIGINT.
func run(ctx context.Context, cmd *cobra.Command, o *options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.awaitSpec {
		bound, err := awaitSpec(cmd, o)
		if !bound || err != nil {
			return err
		}
	}
	if o.workspace == "" {
		return errors.New(`required flag "workspace" not set`)
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
	log.Info("agent serving", "address", lis.Addr().String(), "workspace", o.workspace, "program", program())

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

// program is the main package of the running binary, which tells the lean
// agent (cmd/stackyard-agent) from stackyard in the log.
func program() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Path
	}
	return ""
}

// Authentication modes of serve --auth.
const (
	AuthStatic     = "static"
	AuthKubernetes = "kubernetes"
)

// agentAuthOptions returns the server options that install the
// authentication --auth asks for.
func agentAuthOptions(o *options, log logr.Logger) ([]grpc.ServerOption, error) {
	if o.noAuth {
		return nil, nil
	}
	var a auth.Authorizer
	switch o.authMode {
	case AuthStatic:
		token, err := staticToken(o)
		if err != nil {
			return nil, err
		}
		a = auth.NewStaticToken(token)
	case AuthKubernetes:
		if o.wsNamespace == "" || o.wsName == "" {
			return nil, errors.New("--auth " + AuthKubernetes + " needs --workspace-namespace and --workspace-name")
		}
		if o.kube == nil {
			return nil, errors.New("--auth " + AuthKubernetes + ": this binary has no Kubernetes client; run `stackyard agent serve`")
		}
		k, err := o.kube(o.wsNamespace, o.wsName, log.WithName("auth"))
		if err != nil {
			return nil, err
		}
		a = k
	default:
		return nil, fmt.Errorf("--auth %q: want %s or %s", o.authMode, AuthStatic, AuthKubernetes)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(auth.UnaryInterceptor(a)),
		grpc.ChainStreamInterceptor(auth.StreamInterceptor(a)),
	}, nil
}

// staticToken reads the token from --token-file or the environment.
func staticToken(o *options) (string, error) {
	token := os.Getenv(TokenEnv)
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("read --token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return "", errors.New("no token: pass --token-file or set $" + TokenEnv + " (or --no-auth for local development)")
	}
	return token, nil
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
