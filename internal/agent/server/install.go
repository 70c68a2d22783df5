package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// Install runs `pulumi install` for the project: its language packages
// and plugins. Two things come first. A runtime whose language host is
// nowhere the CLI looks fails with MissingPlugin, saying which host and
// the two ways out, rather than with whatever the CLI prints. And a YAML
// program is not installed, unless its project file declares packages
// (whose SDKs `pulumi install` sets up) or the request asks to reinstall:
// a YAML program has no language packages, and the plugins its resources
// need are resolved by each operation as `pulumi install` would, from the
// same places, and more (the engine looks on PATH, the plugin step of
// `pulumi install` does not; see below). That spares every new Workspace
// of a YAML program one or two CLI runs.
func (s *Server) Install(ctx context.Context, req *agentpb.InstallRequest) (*agentpb.InstallResult, error) {
	if err := s.requireProject(); err != nil {
		return nil, err
	}
	ctx, done, err := s.begin(ctx, "Install")
	if err != nil {
		return nil, err
	}
	defer done()
	ws, err := s.workspace(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	proj, err := ws.ProjectSettings(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	runtime := proj.Runtime.Name()
	if host := languageHost(runtime); !s.findsPlugin(host, "language-"+runtime) {
		return nil, agenterr.New(agenterr.MissingPlugin,
			"the program's runtime %q needs the language host %s, which is neither on the agent's PATH, nor beside the pulumi CLI, "+
				"nor installed under PULUMI_HOME: put %s on the operator's tool path (its --tool-dirs, or PATH), or run the Workspace "+
				"in the kubernetes runtime with an image that has it (pulumi/pulumi-%s, or the pulumi/pulumi image)", runtime, host, host, runtime)
	}
	if runtime == "yaml" && len(proj.Packages) == 0 && !req.GetReinstall() {
		s.log.V(1).Info("a YAML program without packages: nothing to install; its operations resolve its plugins")
		return &agentpb.InstallResult{}, nil
	}
	opts := &auto.InstallOptions{
		NoPlugins:               req.GetNoPlugins(),
		NoDependencies:          req.GetNoDependencies(),
		Reinstall:               req.GetReinstall(),
		UseLanguageVersionTools: req.GetUseLanguageVersionTools(),
	}
	if !opts.NoPlugins && s.acquisitionDisabled() {
		// The plugin step can only download what it resolves, which the
		// CLI is told not to do: the operations find the plugins.
		opts.NoPlugins = true
	}
	err = ws.Install(ctx, opts)
	if err != nil && !opts.NoPlugins && strings.Contains(err.Error(), packagesStep) {
		// The CLI resolves the plugins `pulumi install` installs apart
		// from the engine, and does not look on PATH: a provider baked
		// into the image, or put on the operator's tool path, is fetched
		// instead, which fails without a network or a release to fetch.
		// The engine does look on PATH, and fetches what is missing
		// itself, so the install goes on without its plugin step and the
		// first operation resolves the plugins; a plugin found nowhere
		// then fails that operation with MissingPlugin.
		s.log.Info("pulumi install could not install the program's plugins; the operations will resolve them", "error", s.secrets.Redact(lineWith(err.Error(), packagesStep)))
		opts.NoPlugins = true
		err = ws.Install(ctx, opts)
	}
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	return &agentpb.InstallResult{}, nil
}

// packagesStep begins the error of `pulumi install`'s plugin step (Pulumi
// 3.2xx and later), which installs the packages the language host says the
// program requires.
const packagesStep = "installing packages: "

// lineWith returns the first line of text that contains sub, without its
// line ending ("" when none does).
func lineWith(text, sub string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// acquisitionDisabled reports whether the CLI runs with
// PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION set (in the agent's Env, or
// inherited): plugins are then what is installed already.
func (s *Server) acquisitionDisabled() bool {
	v, ok := s.opts.Env[acquisitionEnv]
	if !ok {
		v = os.Getenv(acquisitionEnv)
	}
	on, err := strconv.ParseBool(v)
	return err == nil && on
}

// acquisitionEnv turns off the CLI's downloads of missing plugins.
const acquisitionEnv = "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"

// languageHost is the executable of runtime's language host.
func languageHost(runtime string) string { return "pulumi-language-" + runtime }

// findsPlugin reports whether the executable name is where the CLI looks
// for a plugin: on the PATH the CLI gets, beside the pulumi binary, or
// installed under PULUMI_HOME/plugins as dir (kind-name) of any version.
func (s *Server) findsPlugin(name, dir string) bool {
	path := s.opts.Env["PATH"]
	if path == "" {
		path = os.Getenv("PATH")
	}
	for _, d := range filepath.SplitList(path) {
		if executable(filepath.Join(d, name)) {
			return true
		}
	}
	cli := s.opts.PulumiPath
	if cli == "" {
		cli, _ = exec.LookPath("pulumi")
	}
	if cli != "" && executable(filepath.Join(filepath.Dir(cli), name)) {
		return true
	}
	home := s.opts.PulumiHome
	if home == "" {
		home = os.Getenv("PULUMI_HOME")
	}
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".pulumi")
		}
	}
	matches, _ := filepath.Glob(filepath.Join(home, "plugins", dir+"-v*", name))
	return len(matches) > 0
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path) //nolint:gosec // a plugin path under the workspace's own Pulumi home
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
