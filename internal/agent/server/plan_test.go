package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// TestPlanAcrossWorkspaces saves a plan in one workspace (a fresh project
// directory, as a promotion's preview has) and holds an update in another
// workspace of the same stack to it: with the same inputs the update
// follows the plan; with a secret input changed since, it is refused with
// PlanViolation before the file changes, and the planned secret value
// appears nowhere. The plan holds secret values only as ciphertext.
func TestPlanAcrossWorkspaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "managed.txt")
	deploy := newHarness(t, resourceProgram)
	deploy.selectStack()
	deploy.setConfig(literal("filePath", path, false), literal("content", "s3cret-v1", true))
	deploy.up(&agentpb.UpRequest{}).mustSucceed(t, "first Up")

	preview := newHarnessEnv(t, resourceProgram, map[string]string{"PULUMI_BACKEND_URL": "file://" + deploy.backend})
	preview.selectStack()
	if got, want := settingsLine(t, preview.dir, "encryptionsalt"), settingsLine(t, deploy.dir, "encryptionsalt"); got == "" || got != want {
		t.Fatalf("the previewing workspace's %q; want the deploying one's %q, which the state records", got, want)
	}
	preview.setConfig(literal("filePath", path, false), literal("content", "s3cret-v2", true))
	saved := collect(preview.client.Preview(preview.ctx(), &agentpb.PreviewRequest{SavePlan: true})).mustSucceed(t, "Preview saving a plan")
	plan := saved.result.GetPlan()
	if len(plan) == 0 || strings.Contains(string(plan), "s3cret-v2") || !strings.Contains(string(plan), "ciphertext") {
		t.Fatalf("plan (%d bytes) must hold the secret only as ciphertext:\n%s", len(plan), plan)
	}
	if again := collect(preview.client.Preview(preview.ctx(), &agentpb.PreviewRequest{})).mustSucceed(t, "Preview"); len(again.result.GetPlan()) != 0 {
		t.Error("a preview without save_plan returned a plan")
	}

	// Same inputs: the update follows the plan.
	deploy.setConfig(literal("content", "s3cret-v2", true))
	deploy.up(&agentpb.UpRequest{Plan: plan}).mustSucceed(t, "Up held to the plan")
	if b, _ := os.ReadFile(path); string(b) != "s3cret-v2" {
		t.Fatalf("managed file = %q; want s3cret-v2", b)
	}

	// A secret input changed after the preview: refused, nothing changed.
	preview.setConfig(literal("content", "planned-s3cret-v3", true))
	plan = collect(preview.client.Preview(preview.ctx(), &agentpb.PreviewRequest{SavePlan: true})).mustSucceed(t, "second Preview").result.GetPlan()
	deploy.setConfig(literal("content", "s3cret-v4", true))
	refused := deploy.up(&agentpb.UpRequest{Plan: plan}).mustFail(t, "Up after an input changed", agenterr.PlanViolation)
	if b, _ := os.ReadFile(path); string(b) != "s3cret-v2" {
		t.Errorf("managed file = %q after a refused update; want s3cret-v2", b)
	}
	msg := refused.result.GetError().GetMessage()
	if !strings.Contains(msg, "violates plan: properties changed (values withheld)") {
		t.Errorf("message %q does not say the plan was violated", msg)
	}
	for where, text := range map[string]string{"the wire": refused.wireText(), "the agent's log": deploy.logs.String()} {
		if strings.Contains(text, "planned-s3cret-v3") || strings.Contains(text, "s3cret-v4") {
			t.Errorf("a secret value appears in %s:\n%s", where, text)
		}
	}
}

// settingsLine returns the value of key in dir's Pulumi.dev.yaml.
func settingsLine(t *testing.T, dir, key string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "Pulumi.dev.yaml"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
