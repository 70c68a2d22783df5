package stack

import (
	"strings"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

// stackField maps a field internal/source blames to the Stack field the
// user wrote: the one place where source errors get the Stack's names, for
// errors of the operator's own branch polls and for those its Workspace
// reports under the Workspace's names (stackMessage).
func stackField(spec *shared.StackSpec, f source.Field) string {
	switch {
	case spec.FluxSource != nil:
		if f == source.FieldDir {
			return "spec.fluxSource.dir"
		}
		return "spec.fluxSource.sourceRef"
	case spec.ProgramRef != nil:
		return "spec.programRef"
	}
	auth := "spec.gitAuth"
	if spec.GitSource != nil && spec.GitAuth == nil && spec.GitAuthSecret != "" {
		auth = "spec.gitAuthSecret"
	}
	switch f {
	case source.FieldURL:
		return "spec.projectRepo"
	case source.FieldCommit:
		return "spec.commit"
	case source.FieldBranch:
		return "spec.branch"
	case source.FieldDir:
		return "spec.repoDir"
	case source.FieldUsername:
		return subfield(auth, ".basicAuth.userName")
	case source.FieldSSHPrivateKey:
		return subfield(auth, ".sshAuth.sshPrivateKey")
	case source.FieldSSHPassphrase:
		return subfield(auth, ".sshAuth.password")
	case source.FieldGitHubApp, source.FieldGitHubAPIURL:
		return subfield(auth, ".githubApp")
	case source.FieldGitHubAppInstallationID:
		return subfield(auth, ".githubApp.installationID")
	case source.FieldGitHubAppPrivateKey:
		return subfield(auth, ".githubApp.privateKey")
	case source.FieldAuth, source.FieldKnownHosts:
		return auth
	default:
		return "spec.projectRepo"
	}
}

// subfield names a part of gitAuth; the deprecated gitAuthSecret has no
// parts, only keys of one Secret.
func subfield(auth, part string) string {
	if auth == "spec.gitAuthSecret" {
		return auth
	}
	return auth + part
}

// sourceKind is the Workspace source kind the Stack's source becomes.
func sourceKind(spec *shared.StackSpec) string {
	if spec.GitSource != nil && spec.ProjectRepo != "" {
		return runtime.SourceGit
	}
	return runtime.SourceFlux
}

// stackMessage restates a message of the Stack's Workspace that begins with
// a Workspace field ("spec.git.dir: NotFound: ...") with the Stack's field
// ("spec.repoDir: NotFound: ..."), so that users read the names of the
// object they wrote. Other messages are returned unchanged.
func stackMessage(spec *shared.StackSpec, msg string) string {
	kind := sourceKind(spec)
	best, to := "", ""
	for _, f := range source.Fields {
		from := runtime.WorkspaceField(kind, f) + ": "
		if strings.HasPrefix(msg, from) && len(from) > len(best) {
			best, to = from, stackField(spec, f)+": "
		}
	}
	if best == "" {
		return msg
	}
	return to + strings.TrimPrefix(msg, best)
}
