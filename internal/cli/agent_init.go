package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/samebuild"
	"github.com/stackyard/stackyard/internal/source"
)

func init() {
	agentSubcommands = append(agentSubcommands, agentInitCommand)
}

// agentInitOptions are the flags of `stackyard agent init`. The source
// flags are internal/source's (source.AddFlags), the same the runtimes
// encode with source.Request.Args. Credentials are never flag values: each
// is read from a file (in a pod, a mounted Secret key) or, failing that,
// from an environment variable.
type agentInitOptions struct {
	target     string
	resultFile string
	copyBinary string
	copyAgent  string
	timeout    time.Duration

	source *source.Flags
}

// agentInitCommand returns `stackyard agent init`.
func agentInitCommand() *cobra.Command {
	o := &agentInitOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Fetch a workspace's program source into a directory before the agent serves it",
		Long: "Fetch a Pulumi program into --target from one source: a git repository (--git-*),\n" +
			"a tar.gz artifact verified by digest (--artifact-*), or a bare project file\n" +
			"(--project-*). The target is replaced only when the fetch fully succeeded.\n" +
			"A git source checks out --git-commit (a full 40-hex SHA) or --git-branch (a branch\n" +
			"or full ref such as refs/tags/v1), or with neither the default branch.\n\n" +
			"On success the revision (commit SHA or artifact digest) is printed on stdout.\n" +
			"--result-file receives the outcome as JSON (revision, or failure reason and whether\n" +
			"it is permanent); in a pod, point it at /dev/termination-log.\n\n" +
			"Credentials are read from files (--git-token-file, ...), or from environment\n" +
			"variables when no file is given: " + credentialEnvNames() + ".\n\n" +
			"--copy-binary copies this stackyard executable to a path first, so an init\n" +
			"container can hand the agent to an image that lacks it. --copy-agent copies the\n" +
			"lean agent instead: stackyard-agent beside this executable, or this executable\n" +
			"where there is none; either runs `serve`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgentInit(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "", "the directory to place the source in (replaced on success)")
	f.StringVar(&o.resultFile, "result-file", "", "write the outcome as JSON to this file")
	f.StringVar(&o.copyBinary, "copy-binary", "", "copy the stackyard executable to this path before fetching")
	f.StringVar(&o.copyAgent, "copy-agent", "", "copy the lean agent (stackyard-agent beside this executable, else this one) to this path before fetching")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up fetching after this long")
	o.source = source.AddFlags(f)
	return cmd
}

// credentialEnvNames lists the credential variables for the help text.
func credentialEnvNames() string {
	names := make([]string, len(source.Credentials))
	for i, c := range source.Credentials {
		names[i] = "$" + c.EnvVar()
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
	if o.copyAgent != "" {
		why, err := copyAgent(o.copyAgent)
		if err != nil {
			return o.report(nil, fmt.Errorf("--copy-agent: %w", err))
		}
		if why != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "--copy-agent: copied stackyard itself, not %s: %s\n", leanAgentName, why)
		}
	}
	req := o.source.Request()
	if req == (source.Request{}) {
		if o.copyBinary == "" && o.copyAgent == "" {
			return o.report(nil, errors.New("nothing to do: give a source (--git-url, --artifact-url or --project-name), --copy-binary or --copy-agent"))
		}
		return o.report(&source.Result{}, nil)
	}
	if o.target == "" {
		return o.report(nil, errors.New("--target is required with a source"))
	}
	spec, err := req.Spec(nil)
	if err != nil {
		return o.report(nil, err)
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

// copySelf copies the running executable to dst (mode 0755), through a
// temporary file renamed into place, so a half-written binary is never run.
func copySelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return copyExecutable(self, dst)
}

// leanAgentName is the lean agent's file name (cmd/stackyard-agent), which
// the images install beside stackyard.
const leanAgentName = "stackyard-agent"

// copyAgent copies the lean agent beside this executable to dst, when it
// is there and the same build (samebuild), or else this executable, whose
// hidden `serve` is the same command; why says why the lean agent was not
// copied, "" when it was. The lean agent is the image's own file, trusted
// as the image is; a stale one of another build is not.
func copyAgent(dst string) (why string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return copyAgentOf(self, dst)
}

// copyAgentOf is copyAgent for the executable self.
func copyAgentOf(self, dst string) (string, error) {
	lean := filepath.Join(filepath.Dir(self), leanAgentName)
	why := "not installed beside it"
	if fi, err := os.Stat(lean); err == nil && fi.Mode().IsRegular() {
		if err := samebuild.Check(self, lean); err != nil {
			why = err.Error()
		} else {
			return "", copyExecutable(lean, dst)
		}
	}
	return why, copyExecutable(self, dst)
}

// copyExecutable copies src to dst, executable, replacing dst at once.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
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
