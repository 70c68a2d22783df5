package source

import (
	"errors"
	"fmt"
)

// Field names the part of a source request an *Error blames, in this
// package's own words rather than any API's: "url" is the repository of a
// git source and the address of an artifact alike. Each controller maps a
// Field to the path of its own object's field in one function (the
// Workspace controller to spec.git.url, the Stack controller to
// spec.projectRepo), so that users read the names of the object they wrote.
type Field string

const (
	// FieldNone blames no single field: the source as a whole, or a local
	// failure such as a full disk.
	FieldNone Field = ""
	// FieldURL is the git repository's URL, or the artifact's address.
	FieldURL Field = "url"
	// FieldCommit is the git commit to check out.
	FieldCommit Field = "commit"
	// FieldBranch is the git branch or full ref to check out, or the
	// remote's default branch when none is given.
	FieldBranch Field = "branch"
	// FieldDir is the directory of the source that holds Pulumi.yaml.
	FieldDir Field = "dir"
	// FieldDigest is the artifact's expected digest.
	FieldDigest Field = "digest"
	// FieldAuth is the git credentials as a whole: the method chosen, or
	// what the server said of them.
	FieldAuth Field = "auth"
	// FieldUsername is the HTTP basic user name.
	FieldUsername Field = "auth.username"
	// FieldSSHPrivateKey is the SSH private key.
	FieldSSHPrivateKey Field = "auth.sshPrivateKey"
	// FieldSSHPassphrase is the passphrase of the SSH private key.
	FieldSSHPassphrase Field = "auth.sshPassphrase" //nolint:gosec // a field's name, not a credential
	// FieldKnownHosts is the known_hosts content the SSH server's host key
	// is checked against.
	FieldKnownHosts Field = "auth.knownHosts"
	// FieldGitHubApp is the GitHub App credentials as a whole.
	FieldGitHubApp Field = "auth.githubApp"
	// FieldGitHubAppInstallationID is the GitHub App installation's ID.
	FieldGitHubAppInstallationID Field = "auth.githubApp.installationID"
	// FieldGitHubAppPrivateKey is the GitHub App's private key.
	FieldGitHubAppPrivateKey Field = "auth.githubApp.privateKey"
	// FieldGitHubAPIURL is the GitHub REST API base a GitHub App token is
	// requested from.
	FieldGitHubAPIURL Field = "auth.githubApp.apiURL"
	// FieldProjectName is the name of a written project.
	FieldProjectName Field = "project.name"
	// FieldProjectRuntime is the runtime of a written project.
	FieldProjectRuntime Field = "project.runtime"
)

// Fields lists every Field but FieldNone, for tests that check a mapping
// covers them all.
var Fields = []Field{
	FieldURL, FieldCommit, FieldBranch, FieldDir, FieldDigest,
	FieldAuth, FieldUsername, FieldSSHPrivateKey, FieldSSHPassphrase, FieldKnownHosts,
	FieldGitHubApp, FieldGitHubAppInstallationID, FieldGitHubAppPrivateKey, FieldGitHubAPIURL,
	FieldProjectName, FieldProjectRuntime,
}

// Locate restates err for the object whose source failed: when err is (or
// wraps) an *Error, the result reads "<path>: <reason>: <message>", path
// being what pathOf returns for the *Error's Field, and still unwraps to
// err, so IsPermanent, ReasonOf and errors.As keep working. Any other
// error is returned unchanged.
func Locate(err error, pathOf func(Field) string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	return &located{text: fmt.Sprintf("%s: %s: %s", pathOf(e.Field), e.Reason, e.Message), err: err}
}

// located is what Locate returns.
type located struct {
	text string
	err  error
}

// Error returns the restated text.
func (l *located) Error() string { return l.text }

// Unwrap returns the original error.
func (l *located) Unwrap() error { return l.err }
