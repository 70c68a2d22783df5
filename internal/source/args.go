package source

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// The flags a Request is encoded as, one per field. They are the source
// flags of `stackyard agent init`; a person may type them too.
const (
	flagGitURL         = "git-url"
	flagGitCommit      = "git-commit"
	flagGitBranch      = "git-branch"
	flagGitDir         = "git-dir"
	flagGitShallow     = "git-shallow"
	flagGitHubAPIURL   = "github-api-url"
	flagArtifactURL    = "artifact-url"
	flagArtifactDigest = "artifact-digest"
	flagArtifactDir    = "artifact-dir"
	flagProjectName    = "project-name"
	flagProjectRuntime = "project-runtime"
)

// Args encodes r as flags, each "--name=value" in a fixed order, leaving
// out empty values, so that DecodeArgs gives r back. Credential values
// never appear: only the files that hold them.
func (r Request) Args() []string {
	var args []string
	add := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name+"="+value)
		}
	}
	if g := r.Git; g != nil {
		add(flagGitURL, g.URL)
		add(flagGitCommit, g.Commit)
		add(flagGitBranch, g.Branch)
		add(flagGitDir, g.Dir)
		if g.Shallow {
			args = append(args, "--"+flagGitShallow)
		}
		for _, c := range Credentials {
			add(c.FileFlag(), g.CredentialFiles[c])
		}
		add(flagGitHubAPIURL, g.GitHubAPIURL)
	}
	if a := r.Artifact; a != nil {
		add(flagArtifactURL, a.URL)
		add(flagArtifactDigest, a.Digest)
		add(flagArtifactDir, a.Dir)
	}
	if p := r.Project; p != nil {
		add(flagProjectName, p.Name)
		add(flagProjectRuntime, p.Runtime)
	}
	return args
}

// Flags decodes a Request from the flags AddFlags registered, once their
// FlagSet has parsed the command line.
type Flags struct {
	git      GitRequest
	files    map[Credential]*string
	artifact ArtifactSpec
	project  ProjectSpec
}

// AddFlags registers the flags Request.Args encodes on fs, for a command
// that has flags of its own (`stackyard agent init`), and returns what
// reads them back.
func AddFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{files: map[Credential]*string{}}
	fs.StringVar(&f.git.URL, flagGitURL, "", "the git repository to clone (https, ssh or git@host:path)")
	fs.StringVar(&f.git.Commit, flagGitCommit, "", "the commit to check out, as its full 40-hex SHA")
	fs.StringVar(&f.git.Branch, flagGitBranch, "", "the branch, or full ref such as refs/tags/v1, to check out; with no commit either: the default branch")
	fs.StringVar(&f.git.Dir, flagGitDir, "", "the directory of the repository holding Pulumi.yaml")
	fs.BoolVar(&f.git.Shallow, flagGitShallow, false, "fetch only the wanted commit")
	for _, c := range Credentials {
		f.files[c] = fs.String(c.FileFlag(), "", fmt.Sprintf("a file holding %s (default $%s)", credentialInfo[c].what, c.EnvVar()))
	}
	fs.StringVar(&f.git.GitHubAPIURL, flagGitHubAPIURL, "", "the GitHub REST API base, for GitHub Enterprise Server")
	fs.StringVar(&f.artifact.URL, flagArtifactURL, "", "the http(s) address of a tar.gz artifact")
	fs.StringVar(&f.artifact.Digest, flagArtifactDigest, "", "the artifact's expected digest, e.g. sha256:<hex>")
	fs.StringVar(&f.artifact.Dir, flagArtifactDir, "", "the directory of the artifact holding Pulumi.yaml")
	fs.StringVar(&f.project.Name, flagProjectName, "", "write only a Pulumi.yaml with this project name")
	fs.StringVar(&f.project.Runtime, flagProjectRuntime, "", "the runtime of the written Pulumi.yaml")
	return f
}

// Request returns the Request the parsed flags describe: a kind of source
// is set when any of its flags has a value, and the zero Request means no
// source flag was given. Values are not checked here; Fetch checks them,
// naming the Field at fault.
func (f *Flags) Request() Request {
	var r Request
	g := f.git
	for _, c := range Credentials {
		if file := *f.files[c]; file != "" {
			if g.CredentialFiles == nil {
				g.CredentialFiles = map[Credential]string{}
			}
			g.CredentialFiles[c] = file
		}
	}
	if g.URL != "" || g.Commit != "" || g.Branch != "" || g.Dir != "" || g.Shallow || g.CredentialFiles != nil || g.GitHubAPIURL != "" {
		r.Git = &g
	}
	if a := f.artifact; a != (ArtifactSpec{}) {
		r.Artifact = &a
	}
	if p := f.project; p != (ProjectSpec{}) {
		r.Project = &p
	}
	return r
}

// DecodeArgs decodes flags that Request.Args encoded, and nothing else:
// an unknown flag or an argument that is not a flag is an error. Both
// "--name=value" and "--name value" are accepted.
func DecodeArgs(args []string) (Request, error) {
	fs := pflag.NewFlagSet("source", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Request{}, err
	}
	if fs.NArg() > 0 {
		return Request{}, fmt.Errorf("unexpected argument %q: only source flags are accepted", fs.Arg(0))
	}
	return f.Request(), nil
}
