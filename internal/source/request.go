package source

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Request is a source to fetch as it crosses from the operator to the
// process that fetches it, `stackyard agent init`: what Spec holds, with
// each credential referred to by the file that holds it instead of its
// value. Args encodes a Request as that command's flags and DecodeArgs (or
// AddFlags, for a command with flags of its own) decodes them, so both
// sides of the boundary share one definition. Set one kind of source.
type Request struct {
	// Git fetches from a git repository.
	Git *GitRequest
	// Artifact fetches a tar.gz artifact verified by digest. Its Limits
	// do not cross the boundary: the fetch applies DefaultLimits.
	Artifact *ArtifactSpec
	// Project writes a bare Pulumi.yaml.
	Project *ProjectSpec
}

// GitRequest is a git source to fetch: GitSpec with credential files.
type GitRequest struct {
	// URL is the repository, http(s)://, ssh:// or user@host:path.
	URL string
	// Commit is an exact commit SHA (see IsCommit) to check out.
	Commit string
	// Branch is a branch or full ref to check out; empty, with no Commit,
	// means the remote's default branch.
	Branch string
	// Dir is the subdirectory holding Pulumi.yaml; empty means the root.
	Dir string
	// Shallow fetches only the one commit instead of history.
	Shallow bool
	// CredentialFiles maps each credential given to the file that holds
	// it. A credential without a file is read from its environment
	// variable (Credential.EnvVar), if set.
	CredentialFiles map[Credential]string
	// GitHubAPIURL is the GitHub REST API base a GitHub App's token is
	// requested from, for GitHub Enterprise Server; empty means
	// DefaultGitHubAPIURL.
	GitHubAPIURL string
}

// Credential names one secret a git source may need. The fetching process
// reads it from the file given with the flag --<credential>-file or, when
// there is none, from the environment variable Credential.EnvVar.
type Credential string

// The credentials of a git source.
const (
	// CredentialUsername is the HTTP basic user name.
	CredentialUsername Credential = "git-username"
	// CredentialPassword is the HTTP basic password.
	CredentialPassword Credential = "git-password"
	// CredentialToken is an access token, sent as the HTTP basic password.
	CredentialToken Credential = "git-token"
	// CredentialSSHKey is an SSH private key.
	CredentialSSHKey Credential = "git-ssh-key" //nolint:gosec // a credential's name, not a credential
	// CredentialSSHPassphrase decrypts the SSH private key.
	CredentialSSHPassphrase Credential = "git-ssh-passphrase" //nolint:gosec // a credential's name, not a credential
	// CredentialKnownHosts is known_hosts content trusted for the SSH
	// server.
	CredentialKnownHosts Credential = "git-known-hosts"
	// CredentialGitHubAppID is a GitHub App's ID.
	CredentialGitHubAppID Credential = "github-app-id" //nolint:gosec // a credential's name, not a credential
	// CredentialGitHubAppInstallationID is the GitHub App installation's ID.
	CredentialGitHubAppInstallationID Credential = "github-app-installation-id" //nolint:gosec // a credential's name, not a credential
	// CredentialGitHubAppPrivateKey is the GitHub App's PEM private key.
	CredentialGitHubAppPrivateKey Credential = "github-app-private-key" //nolint:gosec // a credential's name, not a credential
)

// Credentials lists every Credential, in the order Args encodes them.
var Credentials = []Credential{
	CredentialUsername, CredentialPassword, CredentialToken,
	CredentialSSHKey, CredentialSSHPassphrase, CredentialKnownHosts,
	CredentialGitHubAppID, CredentialGitHubAppInstallationID, CredentialGitHubAppPrivateKey,
}

// credentialInfo describes a credential for help texts, and says whether
// its value is used raw: others are trimmed of surrounding white space,
// since Secrets made from files often end in a newline.
var credentialInfo = map[Credential]struct {
	what string
	raw  bool
}{
	CredentialUsername:                {what: "the HTTP basic user name"},
	CredentialPassword:                {what: "the HTTP basic password"},
	CredentialToken:                   {what: "an access token, sent as the HTTP basic password"},
	CredentialSSHKey:                  {what: "an SSH private key", raw: true},
	CredentialSSHPassphrase:           {what: "the passphrase of the SSH private key"},
	CredentialKnownHosts:              {what: "known_hosts lines trusted for the SSH server", raw: true},
	CredentialGitHubAppID:             {what: "a GitHub App's ID"},
	CredentialGitHubAppInstallationID: {what: "the GitHub App installation's ID"},
	CredentialGitHubAppPrivateKey:     {what: "the GitHub App's PEM private key", raw: true},
}

// FileFlag is the flag naming the file that holds c, without dashes, e.g.
// "git-token-file".
func (c Credential) FileFlag() string { return string(c) + "-file" }

// EnvVar is the environment variable c is read from when no file is
// given, e.g. "STACKYARD_GIT_TOKEN".
func (c Credential) EnvVar() string {
	return "STACKYARD_" + strings.ToUpper(strings.ReplaceAll(string(c), "-", "_"))
}

// Spec reads the credentials r refers to, from their files or, for those
// without one, from getenv (os.Getenv when nil), and returns the source to
// fetch. A file that cannot be read fails with ReasonInternal naming its
// flag; neither a credential nor a file's content ever appears in an
// error.
func (r Request) Spec(getenv func(string) string) (Spec, error) {
	spec := Spec{Artifact: r.Artifact, Project: r.Project}
	if r.Git == nil {
		return spec, nil
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	auth, err := r.Git.auth(getenv)
	if err != nil {
		return Spec{}, err
	}
	g := r.Git
	spec.Git = &GitSpec{URL: g.URL, Commit: g.Commit, Branch: g.Branch, Dir: g.Dir, Shallow: g.Shallow, Auth: auth}
	return spec, nil
}

// auth reads the credentials of g; nil when none is given.
func (g *GitRequest) auth(getenv func(string) string) (*GitAuth, error) {
	v := map[Credential]string{}
	for _, c := range Credentials {
		val, err := readCredential(g.CredentialFiles[c], c.EnvVar(), getenv)
		if err != nil {
			return nil, newError(ReasonInternal, FieldAuth, err, "--%s: %v", c.FileFlag(), err)
		}
		if !credentialInfo[c].raw {
			val = strings.TrimSpace(val)
		}
		v[c] = val
	}
	a := &GitAuth{
		Username:      v[CredentialUsername],
		Password:      v[CredentialPassword],
		Token:         v[CredentialToken],
		SSHPrivateKey: v[CredentialSSHKey],
		SSHPassphrase: v[CredentialSSHPassphrase],
		KnownHosts:    v[CredentialKnownHosts],
	}
	appID, installation, key := v[CredentialGitHubAppID], v[CredentialGitHubAppInstallationID], v[CredentialGitHubAppPrivateKey]
	if appID != "" || installation != "" || key != "" {
		id, err := strconv.ParseInt(installation, 10, 64)
		if err != nil {
			return nil, newError(ReasonInvalidSpec, FieldGitHubAppInstallationID, nil, "not a number")
		}
		a.GitHubApp = &GitHubApp{AppID: appID, InstallationID: id, PrivateKey: key, APIURL: g.GitHubAPIURL}
	}
	if *a == (GitAuth{}) {
		return nil, nil
	}
	return a, nil
}

// readCredential returns the content of file, or the variable env when
// file is "". Neither the value nor the file's content ever appears in an
// error.
func readCredential(file, env string, getenv func(string) string) (string, error) {
	if file == "" {
		return getenv(env), nil
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
