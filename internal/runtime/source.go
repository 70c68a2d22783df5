package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// Source kinds, one per Workspace source field.
const (
	// SourceGit is a git repository (spec.git).
	SourceGit = "git"
	// SourceFlux is a Flux source artifact (spec.flux).
	SourceFlux = "flux"
	// SourceProject is a bare project file (spec.projectInfo).
	SourceProject = "projectInfo"
	// SourceLocal is a directory already holding the program (spec.local).
	SourceLocal = "local"
)

// Source is how a runtime puts a Workspace's program in place: the flags of
// `stackyard agent init` and the Secret keys it reads as files. Both
// runtimes derive it from the Workspace the same way, so a Workspace
// fetches identically whether its agent is a subprocess or a pod.
type Source struct {
	// Kind is SourceGit, SourceFlux, SourceProject or SourceLocal.
	Kind string
	// InitArgs are the source flags of `stackyard agent init`, without
	// --target and without credentials; empty for SourceLocal, which
	// needs no fetch.
	InitArgs []string
	// Credentials are the Secret keys init reads, each from a file.
	Credentials []Credential
	// Dir is the program directory: slash-separated and relative to the
	// init target ("." for its root), or for SourceLocal the absolute
	// directory already holding the program.
	Dir string
}

// Credential is one Secret key handed to `stackyard agent init` as a file.
type Credential struct {
	// Flag is the init flag naming the file, e.g. "--git-token-file".
	Flag string
	// Name is a file name for the key, unique within one Source, e.g.
	// "git-token".
	Name string
	// Secret selects the key, in the Workspace's namespace.
	Secret corev1.SecretKeySelector
}

// SourceOf derives the Source of ws. A Workspace without any source, or
// with a local directory that is not absolute, cannot be run: the error is
// a reconcile.Stalling with reason SourceFailed naming the field.
func SourceOf(ws *autov1alpha1.Workspace) (Source, error) {
	spec := ws.Spec
	switch {
	case spec.Git != nil:
		return gitSource(spec.Git), nil
	case spec.Flux != nil:
		s := Source{Kind: SourceFlux, Dir: relDir(spec.Flux.Dir)}
		s.InitArgs = []string{"--artifact-url", spec.Flux.URL, "--artifact-digest", spec.Flux.Digest}
		if spec.Flux.Dir != "" {
			s.InitArgs = append(s.InitArgs, "--artifact-dir", spec.Flux.Dir)
		}
		return s, nil
	case spec.ProjectInfo != nil:
		return Source{Kind: SourceProject, Dir: ".", InitArgs: []string{
			"--project-name", spec.ProjectInfo.Name, "--project-runtime", spec.ProjectInfo.Runtime,
		}}, nil
	case spec.Local != nil:
		if !path.IsAbs(spec.Local.Dir) {
			return Source{}, reconcile.NewStalling(autov1alpha1.WorkspaceReasonSourceFailed,
				fmt.Errorf("spec.local.dir %q: must be an absolute path", spec.Local.Dir))
		}
		return Source{Kind: SourceLocal, Dir: path.Clean(spec.Local.Dir)}, nil
	default:
		return Source{}, reconcile.NewStalling(autov1alpha1.WorkspaceReasonSourceFailed,
			errors.New("spec: set one of git, flux, local or projectInfo"))
	}
}

// gitSource maps spec.git, with spec.git.auth's Secret keys as files.
func gitSource(g *autov1alpha1.GitSource) Source {
	s := Source{Kind: SourceGit, Dir: relDir(g.Dir), InitArgs: []string{"--git-url", g.URL}}
	if g.Ref != "" {
		s.InitArgs = append(s.InitArgs, "--git-ref", g.Ref)
	}
	if g.Dir != "" {
		s.InitArgs = append(s.InitArgs, "--git-dir", g.Dir)
	}
	if g.Shallow {
		s.InitArgs = append(s.InitArgs, "--git-shallow")
	}
	a := g.Auth
	if a == nil {
		return s
	}
	add := func(name string, sel *corev1.SecretKeySelector) {
		if sel != nil {
			s.Credentials = append(s.Credentials, Credential{Flag: "--" + name + "-file", Name: name, Secret: *sel})
		}
	}
	add("git-ssh-key", a.SSHPrivateKey)
	if a.SSHPrivateKey != nil {
		// With a key, the password is the key's passphrase.
		add("git-ssh-passphrase", a.Password)
	} else {
		add("git-username", a.Username)
		add("git-password", a.Password)
	}
	add("git-token", a.Token)
	if app := a.GitHubApp; app != nil {
		add("github-app-id", &app.AppID)
		add("github-app-installation-id", &app.InstallationID)
		add("github-app-private-key", &app.PrivateKey)
	}
	return s
}

// relDir turns a source subdirectory into the slash-separated form Dir
// holds; init refuses absolute paths and "..", so cleaning is enough here.
func relDir(dir string) string {
	if dir == "" {
		return "."
	}
	return path.Clean(strings.TrimPrefix(dir, "/"))
}

// NeedsInit reports whether the program must be fetched before the agent
// starts; a local directory is served where it is.
func (s Source) NeedsInit() bool { return s.Kind != SourceLocal }

// ProjectDir returns the program directory for an init target.
func (s Source) ProjectDir(target string) string {
	if !s.NeedsInit() {
		return filepath.FromSlash(s.Dir)
	}
	return filepath.Join(target, filepath.FromSlash(s.Dir))
}

// Fingerprint is a digest of everything that decides what is fetched (the
// Secret references, not their content): when it changes, the source must
// be fetched again.
func (s Source) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", s.Kind, s.Dir)
	for _, a := range s.InitArgs {
		fmt.Fprintf(h, "%s\x00", a)
	}
	for _, c := range s.Credentials {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", c.Flag, c.Secret.Name, c.Secret.Key)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// fieldPaths maps the fields internal/source names in its errors to the
// Workspace's, per source kind.
var fieldPaths = map[string]map[string]string{
	SourceGit: {
		"projectRepo": "spec.git.url", "repoDir": "spec.git.dir", "commit": "spec.git.ref", "branch": "spec.git.ref",
		"auth": "spec.git.auth", "sshPrivateKey": "spec.git.auth.sshPrivateKey", "username": "spec.git.auth.username",
		"githubApp": "spec.git.auth.githubApp",
	},
	SourceFlux:    {"url": "spec.flux.url", "digest": "spec.flux.digest", "dir": "spec.flux.dir"},
	SourceProject: {"name": "spec.projectInfo.name", "runtime": "spec.projectInfo.runtime"},
}

// FetchError turns a failed fetch of s into the typed error a runtime's
// Ensure returns: a permanent failure stalls the Workspace with reason
// SourceFailed, anything else is retried with backoff. The message names
// the Workspace field at fault and holds no credential (internal/source
// keeps them out).
func (s Source) FetchError(err error) error {
	var e *source.Error
	if !errors.As(err, &e) {
		return reconcile.NewGeneric(autov1alpha1.WorkspaceReasonSourceFailed, fmt.Errorf("fetching spec.%s: %w", s.Kind, err))
	}
	field, ok := fieldPaths[s.Kind][e.Field]
	if !ok {
		field = "spec." + s.Kind
	}
	wrapped := fmt.Errorf("%s: %s: %s", field, e.Reason, e.Message)
	if e.Permanent {
		return reconcile.NewStalling(autov1alpha1.WorkspaceReasonSourceFailed, wrapped)
	}
	return reconcile.NewGeneric(autov1alpha1.WorkspaceReasonSourceFailed, wrapped)
}
