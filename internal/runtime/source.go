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

// Source is how a runtime puts a Workspace's program in place: what
// `stackyard agent init` fetches and the Secret keys it reads as files.
// Both runtimes derive it from the Workspace the same way, so a Workspace
// fetches identically whether its agent is a subprocess or a pod.
type Source struct {
	// Kind is SourceGit, SourceFlux, SourceProject or SourceLocal.
	Kind string
	// Request is the source to fetch, without its credential files,
	// which only a runtime knows the place of (see InitArgs); the zero
	// Request for SourceLocal, which needs no fetch.
	Request source.Request
	// Credentials are the Secret keys init reads, each from a file.
	Credentials []Credential
	// Dir is the program directory: slash-separated and relative to the
	// init target ("." for its root), or for SourceLocal the absolute
	// directory already holding the program.
	Dir string
}

// Credential is one Secret key handed to `stackyard agent init` as a file.
type Credential struct {
	// Kind is the git credential the key holds. Its name is unique
	// within one Source and is the file name the runtimes give the key,
	// e.g. "git-token".
	Kind source.Credential
	// Field is the path of the Workspace field that selects the key, e.g.
	// "spec.git.auth.token", for errors about the Secret.
	Field string
	// Secret selects the key, in the Workspace's namespace.
	Secret corev1.SecretKeySelector
}

// FileName is the name of the file the key is written to, unique within
// one Source.
func (c Credential) FileName() string { return string(c.Kind) }

// SourceOf derives the Source of ws. A Workspace without any source, or
// with a local directory that is not absolute, cannot be run: the error is
// a reconcile.Stalling with reason SourceFailed naming the field.
func SourceOf(ws *autov1alpha1.Workspace) (Source, error) {
	spec := ws.Spec
	switch {
	case spec.Git != nil:
		return gitSource(spec.Git), nil
	case spec.Flux != nil:
		f := spec.Flux
		return Source{Kind: SourceFlux, Dir: relDir(f.Dir), Request: source.Request{
			Artifact: &source.ArtifactSpec{URL: f.URL, Digest: f.Digest, Dir: f.Dir},
		}}, nil
	case spec.ProjectInfo != nil:
		p := spec.ProjectInfo
		return Source{Kind: SourceProject, Dir: ".", Request: source.Request{
			Project: &source.ProjectSpec{Name: p.Name, Runtime: p.Runtime},
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
// spec.git.ref is a commit when source.IsCommit says so, else a branch or
// tag.
func gitSource(g *autov1alpha1.GitSource) Source {
	req := &source.GitRequest{URL: g.URL, Dir: g.Dir, Shallow: g.Shallow}
	if source.IsCommit(g.Ref) {
		req.Commit = g.Ref
	} else {
		req.Branch = g.Ref
	}
	s := Source{Kind: SourceGit, Dir: relDir(g.Dir), Request: source.Request{Git: req}}
	a := g.Auth
	if a == nil {
		return s
	}
	add := func(kind source.Credential, field string, sel *corev1.SecretKeySelector) {
		if sel != nil {
			s.Credentials = append(s.Credentials, Credential{Kind: kind, Field: "spec.git.auth." + field, Secret: *sel})
		}
	}
	add(source.CredentialSSHKey, "sshPrivateKey", a.SSHPrivateKey)
	if a.SSHPrivateKey != nil {
		// With a key, the password is the key's passphrase.
		add(source.CredentialSSHPassphrase, "password", a.Password)
	} else {
		add(source.CredentialUsername, "username", a.Username)
		add(source.CredentialPassword, "password", a.Password)
	}
	add(source.CredentialToken, "token", a.Token)
	if app := a.GitHubApp; app != nil {
		add(source.CredentialGitHubAppID, "githubApp.appID", &app.AppID)
		add(source.CredentialGitHubAppInstallationID, "githubApp.installationID", &app.InstallationID)
		add(source.CredentialGitHubAppPrivateKey, "githubApp.privateKey", &app.PrivateKey)
	}
	return s
}

// InitArgs returns the source flags of `stackyard agent init`, without
// --target: Request.Args, with each credential read from file(c), the
// place where the runtime puts its Secret key. Empty for SourceLocal.
func (s Source) InitArgs(file func(Credential) string) []string {
	req := s.Request
	if req.Git != nil && len(s.Credentials) > 0 {
		g := *req.Git
		g.CredentialFiles = make(map[source.Credential]string, len(s.Credentials))
		for _, c := range s.Credentials {
			g.CredentialFiles[c.Kind] = file(c)
		}
		req.Git = &g
	}
	return req.Args()
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
	for _, a := range s.InitArgs(Credential.FileName) {
		fmt.Fprintf(h, "%s\x00", a)
	}
	for _, c := range s.Credentials {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", c.Kind, c.Secret.Name, c.Secret.Key)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// workspaceFields maps, per source kind, the parts of a source that
// internal/source blames in its errors to the Workspace fields they come
// from, below spec.<kind>. A credential given in a Workspace field maps to
// it; one that can only come from the environment (known hosts, the GitHub
// API URL) maps to the nearest field.
var workspaceFields = map[string]map[source.Field]string{
	SourceGit: {
		source.FieldURL: "url", source.FieldCommit: "ref", source.FieldBranch: "ref", source.FieldDir: "dir",
		source.FieldAuth: "auth", source.FieldUsername: "auth.username",
		source.FieldSSHPrivateKey: "auth.sshPrivateKey", source.FieldSSHPassphrase: "auth.password",
		source.FieldKnownHosts: "auth", source.FieldGitHubApp: "auth.githubApp",
		source.FieldGitHubAppInstallationID: "auth.githubApp.installationID",
		source.FieldGitHubAppPrivateKey:     "auth.githubApp.privateKey",
		source.FieldGitHubAPIURL:            "auth.githubApp",
	},
	SourceFlux: {source.FieldURL: "url", source.FieldDigest: "digest", source.FieldDir: "dir"},
	SourceProject: {
		source.FieldProjectName: "name", source.FieldProjectRuntime: "runtime",
	},
	SourceLocal: {source.FieldDir: "dir"},
}

// WorkspaceField returns the path of the Workspace field that f, a part of
// a source of the given kind (SourceGit, ...), comes from, e.g.
// "spec.git.ref" for source.FieldCommit of SourceGit. A Field the kind has
// no field for, FieldNone included, maps to the source as a whole
// ("spec.git"). It is the one place the Workspace's names are given to
// source errors.
func WorkspaceField(kind string, f source.Field) string {
	root := "spec." + kind
	if sub, ok := workspaceFields[kind][f]; ok {
		return root + "." + sub
	}
	return root
}

// FetchError turns a failed fetch of s into the typed error a runtime's
// Ensure returns: a permanent failure stalls the Workspace with reason
// SourceFailed, anything else is retried with backoff. A source error
// reads "<Workspace field>: <reason>: <message>", e.g. "spec.git.dir:
// NotFound: \"infra\": no such directory in commit <sha>" (see
// source.Locate and WorkspaceField); any other error reads "fetching
// spec.<kind>: <error>". Neither holds a credential: internal/source keeps
// them out.
func (s Source) FetchError(err error) error {
	var e *source.Error
	if !errors.As(err, &e) {
		return reconcile.NewGeneric(autov1alpha1.WorkspaceReasonSourceFailed, fmt.Errorf("fetching spec.%s: %w", s.Kind, err))
	}
	located := source.Locate(err, func(f source.Field) string { return WorkspaceField(s.Kind, f) })
	if source.IsPermanent(err) {
		return reconcile.NewStalling(autov1alpha1.WorkspaceReasonSourceFailed, located)
	}
	return reconcile.NewGeneric(autov1alpha1.WorkspaceReasonSourceFailed, located)
}
