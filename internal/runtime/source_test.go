package runtime

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// commit is a full commit SHA; nothing here reaches a server.
const commit = "0123456789abcdef0123456789abcdef01234567"

// fieldsOf lists, per source kind, every source.Field a fetch of that kind
// can blame.
var fieldsOf = map[string][]source.Field{
	SourceGit: {
		source.FieldURL, source.FieldCommit, source.FieldBranch, source.FieldDir,
		source.FieldAuth, source.FieldUsername, source.FieldSSHPrivateKey, source.FieldSSHPassphrase, source.FieldKnownHosts,
		source.FieldGitHubApp, source.FieldGitHubAppInstallationID, source.FieldGitHubAppPrivateKey, source.FieldGitHubAPIURL,
	},
	SourceFlux:    {source.FieldURL, source.FieldDigest, source.FieldDir},
	SourceProject: {source.FieldProjectName, source.FieldProjectRuntime},
}

// TestWorkspaceField checks that every field a fetch can blame names a
// field the Workspace really has, below the source it came from.
func TestWorkspaceField(t *testing.T) {
	spec := reflect.TypeFor[autov1alpha1.WorkspaceSpec]()
	covered := map[source.Field]bool{}
	for kind, fields := range fieldsOf {
		if got := WorkspaceField(kind, source.FieldNone); got != "spec."+kind {
			t.Errorf("WorkspaceField(%s, FieldNone) = %q, want spec.%s", kind, got, kind)
		}
		for _, f := range fields {
			covered[f] = true
			got := WorkspaceField(kind, f)
			if !strings.HasPrefix(got, "spec."+kind+".") {
				t.Errorf("WorkspaceField(%s, %s) = %q, want a field below spec.%s", kind, f, got, kind)
				continue
			}
			if !hasField(spec, strings.Split(strings.TrimPrefix(got, "spec."), ".")) {
				t.Errorf("WorkspaceField(%s, %s) = %q: the Workspace has no such field", kind, f, got)
			}
		}
	}
	for _, f := range source.Fields {
		if !covered[f] {
			t.Errorf("source.%s is blamed by no kind of source here: add it to fieldsOf and to workspaceFields", f)
		}
	}

	for _, tc := range []struct {
		kind string
		f    source.Field
		want string
	}{
		{SourceGit, source.FieldURL, "spec.git.url"},
		{SourceGit, source.FieldCommit, "spec.git.ref"},
		{SourceGit, source.FieldBranch, "spec.git.ref"},
		{SourceGit, source.FieldDir, "spec.git.dir"},
		{SourceGit, source.FieldSSHPassphrase, "spec.git.auth.password"},
		{SourceFlux, source.FieldURL, "spec.flux.url"},
		{SourceFlux, source.FieldDigest, "spec.flux.digest"},
		{SourceProject, source.FieldProjectName, "spec.projectInfo.name"},
		{SourceLocal, source.FieldDir, "spec.local.dir"},
		{SourceFlux, source.FieldCommit, "spec.flux"},
	} {
		if got := WorkspaceField(tc.kind, tc.f); got != tc.want {
			t.Errorf("WorkspaceField(%s, %s) = %q, want %q", tc.kind, tc.f, got, tc.want)
		}
	}
}

// hasField reports whether the JSON path names a field of t.
func hasField(t reflect.Type, path []string) bool {
	for _, name := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := range t.NumField() {
			f := t.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestSourceOfGit(t *testing.T) {
	sel := func(key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "git"}, Key: key}
	}
	cases := []struct {
		name  string
		git   autov1alpha1.GitSource
		want  source.GitRequest
		files map[source.Credential]string
	}{
		{name: "branch", git: autov1alpha1.GitSource{URL: "https://example.com/r", Ref: "main", Dir: "infra"},
			want: source.GitRequest{URL: "https://example.com/r", Branch: "main", Dir: "infra"}},
		{name: "commit", git: autov1alpha1.GitSource{URL: "https://example.com/r", Ref: commit, Shallow: true},
			want: source.GitRequest{URL: "https://example.com/r", Commit: commit, Shallow: true}},
		{name: "upper-case hex is a branch", git: autov1alpha1.GitSource{URL: "https://example.com/r", Ref: strings.ToUpper(commit)},
			want: source.GitRequest{URL: "https://example.com/r", Branch: strings.ToUpper(commit)}},
		{name: "default branch", git: autov1alpha1.GitSource{URL: "https://example.com/r"},
			want: source.GitRequest{URL: "https://example.com/r"}},
		{name: "basic auth", git: autov1alpha1.GitSource{URL: "https://example.com/r", Auth: &autov1alpha1.GitAuth{Username: sel("u"), Password: sel("p")}},
			want:  source.GitRequest{URL: "https://example.com/r"},
			files: map[source.Credential]string{source.CredentialUsername: "/c/git-username", source.CredentialPassword: "/c/git-password"}},
		{name: "ssh key with passphrase", git: autov1alpha1.GitSource{URL: "git@example.com:r", Auth: &autov1alpha1.GitAuth{SSHPrivateKey: sel("k"), Password: sel("p")}},
			want:  source.GitRequest{URL: "git@example.com:r"},
			files: map[source.Credential]string{source.CredentialSSHKey: "/c/git-ssh-key", source.CredentialSSHPassphrase: "/c/git-ssh-passphrase"}},
		{name: "github app", git: autov1alpha1.GitSource{URL: "https://github.com/o/r", Auth: &autov1alpha1.GitAuth{GitHubApp: &autov1alpha1.GitHubAppAuth{
			AppID: *sel("id"), InstallationID: *sel("inst"), PrivateKey: *sel("pem")}}},
			want: source.GitRequest{URL: "https://github.com/o/r"},
			files: map[source.Credential]string{source.CredentialGitHubAppID: "/c/github-app-id",
				source.CredentialGitHubAppInstallationID: "/c/github-app-installation-id", source.CredentialGitHubAppPrivateKey: "/c/github-app-private-key"}},
	}
	spec := reflect.TypeFor[autov1alpha1.WorkspaceSpec]()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := SourceOf(&autov1alpha1.Workspace{Spec: autov1alpha1.WorkspaceSpec{Git: &tc.git}})
			if err != nil {
				t.Fatal(err)
			}
			if src.Request.Git == nil || !reflect.DeepEqual(*src.Request.Git, tc.want) {
				t.Errorf("Request.Git = %+v, want %+v (credentials stay out of it)", src.Request.Git, tc.want)
			}
			for _, c := range src.Credentials {
				if !hasField(spec, strings.Split(strings.TrimPrefix(c.Field, "spec."), ".")) {
					t.Errorf("credential %s: the Workspace has no field %s", c.Kind, c.Field)
				}
			}
			got, err := source.DecodeArgs(src.InitArgs(func(c Credential) string { return "/c/" + c.FileName() }))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.CredentialFiles = tc.files
			if got.Git == nil || !reflect.DeepEqual(*got.Git, want) {
				t.Errorf("agent init decodes %+v, want %+v", got.Git, want)
			}
		})
	}
}

func TestSourceFingerprint(t *testing.T) {
	ws := &autov1alpha1.Workspace{Spec: autov1alpha1.WorkspaceSpec{Git: &autov1alpha1.GitSource{URL: "https://example.com/r", Ref: "main"}}}
	fingerprint := func() string {
		t.Helper()
		src, err := SourceOf(ws)
		if err != nil {
			t.Fatal(err)
		}
		return src.Fingerprint()
	}
	seen := map[string]string{}
	for _, step := range []struct {
		name   string
		mutate func()
	}{
		{"branch", func() {}},
		{"commit", func() { ws.Spec.Git.Ref = commit }},
		{"dir", func() { ws.Spec.Git.Dir = "infra" }},
		{"token", func() {
			ws.Spec.Git.Auth = &autov1alpha1.GitAuth{Token: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Key: "t"}}
		}},
		{"token's secret", func() { ws.Spec.Git.Auth.Token.Name = "b" }},
	} {
		step.mutate()
		fp := fingerprint()
		if prev, ok := seen[fp]; ok {
			t.Errorf("%s: same fingerprint as %s", step.name, prev)
		}
		seen[fp] = step.name
		if again := fingerprint(); again != fp {
			t.Errorf("%s: fingerprint not stable: %s, then %s", step.name, fp, again)
		}
	}
}

func TestFetchError(t *testing.T) {
	git := Source{Kind: SourceGit}
	permanent := &source.Error{Reason: source.ReasonNotFound, Field: source.FieldDir, Permanent: true, Message: `"infra": no such directory in commit ` + commit}
	err := git.FetchError(permanent)
	var stalling *reconcile.Stalling
	if !errors.As(err, &stalling) || stalling.Reason != autov1alpha1.WorkspaceReasonSourceFailed ||
		!strings.Contains(err.Error(), `spec.git.dir: NotFound: "infra": no such directory in commit `+commit) {
		t.Errorf("permanent: %v, want a Stalling SourceFailed naming spec.git.dir", err)
	}
	if source.ReasonOf(err) != source.ReasonNotFound {
		t.Errorf("the source error is lost: reason %q", source.ReasonOf(err))
	}

	err = Source{Kind: SourceFlux}.FetchError(&source.Error{Reason: source.ReasonUnreachable, Field: source.FieldURL, Message: "connection refused"})
	if errors.As(err, &stalling) || reconcile.Reason(err) != autov1alpha1.WorkspaceReasonSourceFailed || !strings.Contains(err.Error(), "spec.flux.url: Unreachable: connection refused") {
		t.Errorf("transient: %v, want a retried SourceFailed naming spec.flux.url", err)
	}

	err = git.FetchError(errors.New("killed"))
	if errors.As(err, &stalling) || !strings.Contains(err.Error(), "fetching spec.git: killed") {
		t.Errorf("other error: %v", err)
	}

	// A remote helper is refused by its scheme, naming the URL, before
	// any credential is looked at.
	for _, url := range []string{"ext::sh -c touch% /tmp/pwned", "file:///etc"} {
		_, ferr := source.FetchGit(context.Background(), t.TempDir(), source.GitSpec{URL: url})
		err = git.FetchError(ferr)
		if !errors.As(err, &stalling) || !strings.Contains(err.Error(), "spec.git.url: InvalidSpec: ") || !strings.Contains(err.Error(), "unsupported URL scheme") {
			t.Errorf("%s: %v, want a Stalling error naming spec.git.url and the scheme", url, err)
		}
	}
}
