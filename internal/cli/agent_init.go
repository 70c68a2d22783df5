package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/source"
)

func init() {
	agentSubcommands = append(agentSubcommands, agentInitCommand)
}

// agentInitOptions are the flags of `stackyard agent init`. Credentials are
// never flag values: each is read from a file (in a pod, a mounted Secret
// key) or, failing that, from an environment variable.
type agentInitOptions struct {
	target     string
	resultFile string
	copyBinary string
	timeout    time.Duration

	gitURL, gitRef, gitDir string
	gitShallow             bool
	gitFiles               map[string]*string // credential name -> file flag value

	artifactURL, artifactDigest, artifactDir string

	projectName, projectRuntime string

	githubAPIURL string
}

// gitCredentials are the credentials `agent init` reads, each from
// --<flag>-file or, when that is not given, from $<env>. Values are trimmed
// of surrounding white space (Secrets made from files often end in a
// newline) except raw ones, which are parsed whole.
var gitCredentials = []struct {
	flag, env, what string
	raw             bool
}{
	{flag: "git-username", env: "STACKYARD_GIT_USERNAME", what: "the HTTP basic user name"},
	{flag: "git-password", env: "STACKYARD_GIT_PASSWORD", what: "the HTTP basic password"},
	{flag: "git-token", env: "STACKYARD_GIT_TOKEN", what: "an access token, sent as the HTTP basic password"},
	{flag: "git-ssh-key", env: "STACKYARD_GIT_SSH_KEY", what: "an SSH private key", raw: true},
	{flag: "git-ssh-passphrase", env: "STACKYARD_GIT_SSH_PASSPHRASE", what: "the passphrase of the SSH private key"},
	{flag: "git-known-hosts", env: "STACKYARD_GIT_KNOWN_HOSTS", what: "known_hosts lines trusted for the SSH server", raw: true},
	{flag: "github-app-id", env: "STACKYARD_GITHUB_APP_ID", what: "a GitHub App's ID"},
	{flag: "github-app-installation-id", env: "STACKYARD_GITHUB_APP_INSTALLATION_ID", what: "the GitHub App installation's ID"},
	{flag: "github-app-private-key", env: "STACKYARD_GITHUB_APP_PRIVATE_KEY", what: "the GitHub App's PEM private key", raw: true},
}

// agentInitCommand returns `stackyard agent init`.
func agentInitCommand() *cobra.Command {
	o := &agentInitOptions{gitFiles: map[string]*string{}}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Fetch a workspace's program source into a directory before the agent serves it",
		Long: "Fetch a Pulumi program into --target from one source: a git repository (--git-*),\n" +
			"a tar.gz artifact verified by digest (--artifact-*), or a bare project file\n" +
			"(--project-*). The target is replaced only when the fetch fully succeeded.\n\n" +
			"On success the revision (commit SHA or artifact digest) is printed on stdout.\n" +
			"--result-file receives the outcome as JSON (revision, or failure reason and whether\n" +
			"it is permanent); in a pod, point it at /dev/termination-log.\n\n" +
			"Credentials are read from files (--git-token-file, ...), or from environment\n" +
			"variables when no file is given: " + credentialEnvNames() + ".\n\n" +
			"--copy-binary copies this stackyard executable to a path first, so an init\n" +
			"container can hand the agent to an image that lacks it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgentInit(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "", "the directory to place the source in (replaced on success)")
	f.StringVar(&o.resultFile, "result-file", "", "write the outcome as JSON to this file")
	f.StringVar(&o.copyBinary, "copy-binary", "", "copy the stackyard executable to this path before fetching")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up fetching after this long")

	f.StringVar(&o.gitURL, "git-url", "", "the git repository to clone (https, ssh or git@host:path)")
	f.StringVar(&o.gitRef, "git-ref", "", "the branch, tag or full ref, or a 40-hex commit SHA; empty: the default branch")
	f.StringVar(&o.gitDir, "git-dir", "", "the directory of the repository holding Pulumi.yaml")
	f.BoolVar(&o.gitShallow, "git-shallow", false, "fetch only the wanted commit (branches and tags only)")
	for _, c := range gitCredentials {
		var v string
		o.gitFiles[c.flag] = &v
		f.StringVar(&v, c.flag+"-file", "", "a file holding "+c.what+" (default $"+c.env+")")
	}
	f.StringVar(&o.githubAPIURL, "github-api-url", "", "the GitHub REST API base, for GitHub Enterprise Server")

	f.StringVar(&o.artifactURL, "artifact-url", "", "the http(s) address of a tar.gz artifact")
	f.StringVar(&o.artifactDigest, "artifact-digest", "", "the artifact's expected digest, e.g. sha256:<hex>")
	f.StringVar(&o.artifactDir, "artifact-dir", "", "the directory of the artifact holding Pulumi.yaml")

	f.StringVar(&o.projectName, "project-name", "", "write only a Pulumi.yaml with this project name")
	f.StringVar(&o.projectRuntime, "project-runtime", "", "the runtime of the written Pulumi.yaml")
	return cmd
}

// credentialEnvNames lists the credential variables for the help text.
func credentialEnvNames() string {
	names := make([]string, len(gitCredentials))
	for i, c := range gitCredentials {
		names[i] = "$" + c.env
	}
	return strings.Join(names, ", ")
}

// runAgentInit copies the binary if asked, then fetches the source and
// reports the outcome on stdout and in --result-file.
func runAgentInit(cmd *cobra.Command, o *agentInitOptions) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	if o.copyBinary != "" {
		if err := copySelf(o.copyBinary); err != nil {
			return o.report(nil, fmt.Errorf("--copy-binary: %w", err))
		}
	}
	spec, err := o.sourceSpec()
	if err != nil {
		return o.report(nil, err)
	}
	if spec == (source.Spec{}) {
		if o.copyBinary == "" {
			return o.report(nil, errors.New("nothing to do: give a source (--git-url, --artifact-url or --project-name) or --copy-binary"))
		}
		return o.report(&source.Result{}, nil)
	}
	if o.target == "" {
		return o.report(nil, errors.New("--target is required with a source"))
	}
	res, err := source.Fetch(ctx, o.target, spec)
	if err != nil {
		return o.report(nil, err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	if rev := res.Revision(); rev != "" {
		fmt.Fprintln(cmd.OutOrStdout(), rev)
	}
	return o.report(res, nil)
}

// report writes the outcome to --result-file (if given) and returns err, so
// the command exits non-zero on failure with the message on stderr.
func (o *agentInitOptions) report(res *source.Result, err error) error {
	if o.resultFile != "" {
		if werr := source.NewReport(res, err).WriteFile(o.resultFile); werr != nil && err == nil {
			return fmt.Errorf("--result-file: %w", werr)
		}
	}
	return err
}

// sourceSpec builds the source from the flags; the zero Spec means no
// source flag was given.
func (o *agentInitOptions) sourceSpec() (source.Spec, error) {
	var spec source.Spec
	if o.gitURL != "" {
		auth, err := o.gitAuth()
		if err != nil {
			return spec, err
		}
		g := &source.GitSpec{URL: o.gitURL, Dir: o.gitDir, Shallow: o.gitShallow, Auth: auth}
		if commitPattern.MatchString(o.gitRef) {
			g.Commit = o.gitRef
		} else {
			g.Branch = o.gitRef
		}
		spec.Git = g
	}
	if o.artifactURL != "" || o.artifactDigest != "" {
		spec.Artifact = &source.ArtifactSpec{URL: o.artifactURL, Digest: o.artifactDigest, Dir: o.artifactDir}
	}
	if o.projectName != "" || o.projectRuntime != "" {
		spec.Project = &source.ProjectSpec{Name: o.projectName, Runtime: o.projectRuntime}
	}
	return spec, nil
}

// commitPattern tells a commit SHA from a branch in --git-ref.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// gitAuth reads the credentials; nil when none is given.
func (o *agentInitOptions) gitAuth() (*source.GitAuth, error) {
	v := map[string]string{}
	for _, c := range gitCredentials {
		val, err := readCredential(*o.gitFiles[c.flag], c.env)
		if err != nil {
			return nil, fmt.Errorf("--%s-file: %w", c.flag, err)
		}
		if !c.raw {
			val = strings.TrimSpace(val)
		}
		v[c.flag] = val
	}
	a := &source.GitAuth{
		Username:      v["git-username"],
		Password:      v["git-password"],
		Token:         v["git-token"],
		SSHPrivateKey: v["git-ssh-key"],
		SSHPassphrase: v["git-ssh-passphrase"],
		KnownHosts:    v["git-known-hosts"],
	}
	if v["github-app-id"] != "" || v["github-app-installation-id"] != "" || v["github-app-private-key"] != "" {
		id, err := strconv.ParseInt(v["github-app-installation-id"], 10, 64)
		if err != nil {
			return nil, &source.Error{Reason: source.ReasonInvalidSpec, Field: "githubApp", Permanent: true,
				Message: "githubApp: the installation ID is not a number"}
		}
		a.GitHubApp = &source.GitHubApp{AppID: v["github-app-id"], InstallationID: id,
			PrivateKey: v["github-app-private-key"], APIURL: o.githubAPIURL}
	}
	if *a == (source.GitAuth{}) {
		return nil, nil
	}
	return a, nil
}

// readCredential returns the content of file, or $env when file is "".
// Neither the value nor its file's content ever appears in an error.
func readCredential(file, env string) (string, error) {
	if file == "" {
		return os.Getenv(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "", fmt.Errorf("reading %s: %w", file, pe.Err)
		}
		return "", err
	}
	return string(b), nil
}

// copySelf copies the running executable to dst (mode 0755), through a
// temporary file renamed into place, so a half-written binary is never run.
func copySelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
