package server_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/pulumiversion"
)

// configOnlyProgram is a YAML program without resources, so it needs no
// provider.
const configOnlyProgram = `name: basics
runtime: yaml
outputs:
  greeting: hello
`

// TestStackCalls covers the unary calls around stack selection on the real
// CLI: version, identity, project info before and after selecting, creating
// and re-selecting a stack, a missing stack, Install and AddEnvironments.
func TestStackCalls(t *testing.T) {
	h := newHarness(t, configOnlyProgram)
	ctx := h.ctx()

	ver, err := h.client.PulumiVersion(ctx, &agentpb.PulumiVersionRequest{})
	if err != nil || ver.GetVersion() != pulumiversion.Pinned {
		t.Fatalf("PulumiVersion = %v, %v; want %s", ver, err, pulumiversion.Pinned)
	}

	who, err := h.client.WhoAmI(ctx, &agentpb.WhoAmIRequest{})
	if err != nil {
		t.Fatalf("WhoAmI: %v", err)
	}
	if who.GetUser() == "" || who.GetUrl() != "file://"+h.backend {
		t.Errorf("WhoAmI = %v; want a user and url file://%s", who, h.backend)
	}

	info, err := h.client.Info(ctx, &agentpb.InfoRequest{})
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.GetProject() != "basics" || info.GetRuntime() != "yaml" || info.GetWorkDir() != h.dir || info.GetStack() != nil {
		t.Errorf("Info before SelectStack = %v", info)
	}

	_, err = h.client.SelectStack(ctx, &agentpb.SelectStackRequest{StackName: "nope"})
	if agenterr.ReasonOf(err) != agenterr.StackNotFound || status.Code(err) != codes.NotFound {
		t.Errorf("SelectStack of a missing stack: %v (reason %s), want StackNotFound", err, agenterr.ReasonOf(err))
	}

	sp := "passphrase"
	sel, err := h.client.SelectStack(ctx, &agentpb.SelectStackRequest{StackName: "dev", Create: true, SecretsProvider: &sp})
	if err != nil {
		t.Fatalf("SelectStack create: %v", err)
	}
	if sel.GetSummary().GetName() != "dev" {
		t.Errorf("SelectStack summary = %v", sel.GetSummary())
	}
	// Selecting again, with or without create, finds the same stack.
	for _, create := range []bool{true, false} {
		if _, err := h.client.SelectStack(ctx, &agentpb.SelectStackRequest{StackName: "dev", Create: create}); err != nil {
			t.Fatalf("SelectStack again (create=%v): %v", create, err)
		}
	}

	info, err = h.client.Info(ctx, &agentpb.InfoRequest{})
	if err != nil || info.GetStack().GetName() != "dev" {
		t.Fatalf("Info after SelectStack = %v, %v", info, err)
	}

	if _, err := h.client.Install(ctx, &agentpb.InstallRequest{}); err != nil {
		t.Errorf("Install: %v", err)
	}

	// The self-managed backend has no ESC environments.
	_, err = h.client.AddEnvironments(ctx, &agentpb.AddEnvironmentsRequest{Environment: []string{"team/dev"}})
	if agenterr.ReasonOf(err) != agenterr.Unsupported || !strings.Contains(err.Error(), "environments") {
		t.Errorf("AddEnvironments on a file backend: %v (reason %s), want Unsupported", err, agenterr.ReasonOf(err))
	}
}

// TestMissingLanguageHost installs a program whose runtime has no
// language host where the CLI looks: the error names the host and the two
// ways out, and is a MissingPlugin, which stalls the Workspace.
func TestMissingLanguageHost(t *testing.T) {
	h := newHarness(t, "name: web\nruntime: nodejs\n")
	_, err := h.client.Install(h.ctx(), &agentpb.InstallRequest{})
	if agenterr.ReasonOf(err) != agenterr.MissingPlugin {
		t.Fatalf("Install of a nodejs program here: %v (reason %s), want MissingPlugin", err, agenterr.ReasonOf(err))
	}
	for _, want := range []string{`runtime "nodejs"`, "pulumi-language-nodejs", "--tool-dirs", "kubernetes runtime", "pulumi/pulumi-nodejs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if len(h.commands()) != 0 {
		t.Errorf("the CLI ran %q for a program it cannot run", h.commands())
	}
}

// TestMissingProject checks that a workspace without Pulumi.yaml gives a
// clear ProjectNotFound error rather than a CLI dump.
func TestMissingProject(t *testing.T) {
	h := newHarness(t, "")
	_, err := h.client.SelectStack(h.ctx(), &agentpb.SelectStackRequest{StackName: "dev", Create: true})
	if agenterr.ReasonOf(err) != agenterr.ProjectNotFound || !strings.Contains(err.Error(), "Pulumi.yaml") {
		t.Errorf("SelectStack without Pulumi.yaml: %v (reason %s), want ProjectNotFound naming Pulumi.yaml", err, agenterr.ReasonOf(err))
	}
	_, err = h.client.Info(h.ctx(), &agentpb.InfoRequest{})
	if agenterr.ReasonOf(err) != agenterr.ProjectNotFound {
		t.Errorf("Info without Pulumi.yaml: %v (reason %s), want ProjectNotFound", err, agenterr.ReasonOf(err))
	}
	r := collect(h.client.Up(h.ctx(), &agentpb.UpRequest{}))
	r.mustFail(t, "Up before SelectStack", agenterr.NoStackSelected)
}

// TestAuthentication checks that the server installs the interceptors it
// is given: a wrong token is refused before any handler runs.
func TestAuthentication(t *testing.T) {
	h := newHarness(t, configOnlyProgram)
	// Reach the same server with another token through a second client.
	addr := h.addr()
	bad := dial(t, addr, "wrong-token")
	_, err := bad.PulumiVersion(h.ctx(), &agentpb.PulumiVersionRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("call with a wrong token: %v, want Unauthenticated", err)
	}
	if strings.Contains(err.Error(), "wrong-token") || strings.Contains(err.Error(), testToken) {
		t.Errorf("error echoes a token: %v", err)
	}
}
