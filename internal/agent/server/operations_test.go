package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// resourceProgram manages a file and a random value with the test provider.
const resourceProgram = `name: res
runtime: yaml
config:
  filePath:
    type: string
  content:
    type: string
resources:
  file:
    type: stackyardtest:index:File
    properties:
      path: ${filePath}
      content: ${content}
  rnd:
    type: stackyardtest:index:Random
    properties:
      length: 16
outputs:
  sha: ${file.sha256}
  plain: ${rnd.result}
  hidden: ${rnd.secretResult}
`

const (
	fileURN   = "urn:pulumi:dev::res::stackyardtest:index:File::file"
	randomURN = "urn:pulumi:dev::res::stackyardtest:index:Random::rnd"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestResourceLifecycle runs up, drift detection, refresh, replace,
// targeted up and destroy against real resources of the test provider, and
// checks the change counts the results report and the files on disk.
func TestResourceLifecycle(t *testing.T) {
	h := newHarness(t, resourceProgram)
	path := filepath.Join(t.TempDir(), "managed.txt")
	h.selectStack()
	h.setConfig(literal("filePath", path, false), literal("content", "v1", false))

	up := h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up")
	if got := up.result.GetChanges()["create"]; got != 3 {
		t.Errorf("Up changes = %v; want create: 3 (stack, file, random)", up.result.GetChanges())
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "v1" {
		t.Fatalf("managed file = %q, %v; want v1", b, err)
	}
	if got := output(t, up.result, "sha"); got != sha256Hex("v1") {
		t.Errorf("output sha = %v", got)
	}
	if got, _ := output(t, up.result, "plain").(string); len(got) != 16 {
		t.Errorf("output plain = %q; want 16 characters", got)
	}
	hidden := up.result.GetOutputs()["hidden"]
	if !hidden.GetSecret() || hidden.GetValue() != nil {
		t.Errorf("secret output = %v; want masked", hidden)
	}

	// Someone edits the managed file: a drift check reports it, a refresh
	// adopts it, and the next up puts the program's content back.
	writeFile(t, path, "tampered")
	drift := collect(h.client.Refresh(h.ctx(), &agentpb.RefreshRequest{PreviewOnly: true, ExpectNoChanges: true}))
	drift.mustFail(t, "drift check", agenterr.UnexpectedChanges)
	if drift.result.GetError().GetReason() != string(agenterr.UnexpectedChanges) || drift.result.GetChanges()["update"] != 1 {
		t.Errorf("drift check result = %v; want an UnexpectedChanges error and update: 1", drift.result)
	}
	refresh := collect(h.client.Refresh(h.ctx(), &agentpb.RefreshRequest{})).mustSucceed(t, "Refresh")
	if refresh.result.GetChanges()["update"] != 1 {
		t.Errorf("Refresh changes = %v; want update: 1", refresh.result.GetChanges())
	}
	h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up after drift")
	if b, _ := os.ReadFile(path); string(b) != "v1" {
		t.Errorf("managed file after up = %q; want v1", b)
	}

	replaced := h.up(&agentpb.UpRequest{Replace: []string{randomURN}}).mustSucceed(t, "Up with replace")
	if replaced.result.GetChanges()["replace"] != 1 {
		t.Errorf("Up with replace changes = %v; want replace: 1", replaced.result.GetChanges())
	}
	if output(t, replaced.result, "plain") == output(t, up.result, "plain") {
		t.Error("replacing the random resource kept its value")
	}

	h.setConfig(literal("content", "v2", false))
	preview := collect(h.client.Preview(h.ctx(), &agentpb.PreviewRequest{Target: []string{fileURN}})).mustSucceed(t, "targeted Preview")
	if preview.result.GetChanges()["update"] != 1 {
		t.Errorf("targeted Preview changes = %v; want update: 1", preview.result.GetChanges())
	}
	h.up(&agentpb.UpRequest{Target: []string{fileURN}, Parallel: 2}).mustSucceed(t, "targeted Up")
	if b, _ := os.ReadFile(path); string(b) != "v2" {
		t.Errorf("managed file after targeted up = %q; want v2", b)
	}

	destroy := collect(h.client.Destroy(h.ctx(), &agentpb.DestroyRequest{Remove: true})).mustSucceed(t, "Destroy")
	if destroy.result.GetChanges()["delete"] != 3 {
		t.Errorf("Destroy changes = %v; want delete: 3", destroy.result.GetChanges())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("managed file still exists after destroy: %v", err)
	}
	// remove deleted the stack, so the agent no longer has one selected.
	collect(h.client.Preview(h.ctx(), &agentpb.PreviewRequest{})).mustFail(t, "Preview after remove", agenterr.NoStackSelected)
}

// TestFailureClassification runs programs that fail in different ways and
// checks the reason each failure carries, that the stream still ends with
// a Result holding the error, and that a secret in a failure message is
// redacted.
func TestFailureClassification(t *testing.T) {
	h := newHarness(t, configOnlyProgram)
	h.selectStack()
	const secretMessage = "fail-with-s3cr3t-text"
	h.setConfig(literal("failMessage", secretMessage, true))

	for _, tc := range []struct {
		name    string
		program string
		reason  agenterr.Reason
		text    string
	}{
		{"unknown variable", `name: basics
runtime: yaml
outputs:
  o: ${nope.value}
`, agenterr.ProgramError, `"nope" could not be found`},
		{"invalid YAML", "name: basics\nruntime: yaml\noutputs: [\n", agenterr.ProgramError, "Pulumi.yaml"},
		{"missing config", `name: basics
runtime: yaml
config:
  required:
    type: string
outputs:
  o: ${required}
`, agenterr.InvalidConfig, "required"},
		{"unknown package", `name: basics
runtime: yaml
resources:
  x:
    type: notapkg:index:Thing
`, agenterr.MissingPlugin, "notapkg"},
		{"resource failure", `name: basics
runtime: yaml
config:
  failMessage:
    type: string
resources:
  f:
    type: stackyardtest:index:Fail
    properties:
      message: ${failMessage}
      fail: true
`, agenterr.ResourceFailed, "stackyardtest:index:Fail f: [secret]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, filepath.Join(h.dir, "Pulumi.yaml"), tc.program)
			r := h.up(&agentpb.UpRequest{}).mustFail(t, "Up", tc.reason)
			if !strings.Contains(r.err.Error(), tc.text) {
				t.Errorf("error %q does not mention %q", r.err, tc.text)
			}
			if r.result == nil || r.result.GetError().GetReason() != string(tc.reason) || r.result.GetSummary().GetResult() != "failed" {
				t.Errorf("result = %v; want a failed summary and error reason %s", r.result, tc.reason)
			}
			if strings.Contains(r.wireText(), secretMessage) {
				t.Errorf("the secret config value reached the wire: %s", r.wireText())
			}
		})
	}
	if strings.Contains(h.logs.String(), secretMessage) {
		t.Errorf("the secret config value reached the agent's log")
	}
}
