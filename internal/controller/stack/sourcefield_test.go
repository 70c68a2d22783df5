package stack

import (
	"strings"
	"testing"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

func TestStackFieldCoversEveryField(t *testing.T) {
	specs := map[string]*shared.StackSpec{
		"git":           {GitSource: &shared.GitSource{ProjectRepo: "https://git.example/repo", Branch: "main", GitAuth: &shared.GitAuthConfig{}}},
		"gitAuthSecret": {GitSource: &shared.GitSource{ProjectRepo: "https://git.example/repo", Branch: "main", GitAuthSecret: "creds"}},
		"flux":          {FluxSource: &shared.FluxSource{Dir: "infra"}},
		"program":       {ProgramRef: &shared.ProgramReference{Name: "p"}},
	}
	for name, spec := range specs {
		for _, f := range source.Fields {
			got := stackField(spec, f)
			if !strings.HasPrefix(got, "spec.") {
				t.Errorf("%s: stackField(%q) = %q, want a spec field", name, f, got)
			}
			if strings.Contains(got, "spec.git.") || strings.Contains(got, "spec.flux.") {
				t.Errorf("%s: stackField(%q) = %q names a Workspace field", name, f, got)
			}
		}
	}
}

func TestStackMessage(t *testing.T) {
	git := &shared.StackSpec{GitSource: &shared.GitSource{ProjectRepo: "https://git.example/repo", Branch: "main", GitAuth: &shared.GitAuthConfig{}}}
	flux := &shared.StackSpec{FluxSource: &shared.FluxSource{Dir: "infra"}}
	tests := []struct {
		name string
		spec *shared.StackSpec
		msg  string
		want string
	}{
		{"repoDir", git, "spec.git.dir: NotFound: no such directory", "spec.repoDir: NotFound: no such directory"},
		{"url", git, "spec.git.url: InvalidSpec: unsupported URL scheme \"ext\"", "spec.projectRepo: InvalidSpec: unsupported URL scheme \"ext\""},
		{"ssh key, the longest match", git, "spec.git.auth.sshPrivateKey: AuthFailed: refused", "spec.gitAuth.sshAuth.sshPrivateKey: AuthFailed: refused"},
		{"flux dir", flux, "spec.flux.dir: NotFound: x", "spec.fluxSource.dir: NotFound: x"},
		{"no field", git, "the agent did not start", "the agent did not start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stackMessage(tt.spec, tt.msg); got != tt.want {
				t.Errorf("stackMessage(%q) = %q, want %q", tt.msg, got, tt.want)
			}
		})
	}
	// Every Workspace path the runtime reports is restated.
	for _, f := range source.Fields {
		msg := runtime.WorkspaceField(runtime.SourceGit, f) + ": Reason: m"
		if got := stackMessage(git, msg); strings.HasPrefix(got, "spec.git.") {
			t.Errorf("stackMessage(%q) = %q kept the Workspace field", msg, got)
		}
	}
}
