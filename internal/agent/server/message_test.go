package server_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// TestUpdateMessage checks the message of an update whose summary the
// agent builds from its events: the one the CLI records in the stack's
// history, read here with `pulumi stack history`: the title of the
// program's commit when the request gives none, the request's otherwise.
func TestUpdateMessage(t *testing.T) {
	h := newHarness(t, warmProgram)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = h.dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com",
			"GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "Pulumi.yaml")
	git("commit", "-q", "-m", "Greet in French\n\nThe body is not the title.")
	path := filepath.Join(t.TempDir(), "greeting.txt")

	recorded := func() string {
		t.Helper()
		cmd := exec.Command("pulumi", "stack", "history", "--json", "--page-size", "1", "--stack", "dev")
		cmd.Dir = h.dir
		cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+h.backend)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pulumi stack history: %v", err)
		}
		var entries []struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(out, &entries); err != nil || len(entries) != 1 {
			t.Fatalf("pulumi stack history printed %s (%v)", out, err)
		}
		return entries[0].Message
	}

	h.setUp("dev", warmConfig(path, "bonjour")...)
	r := h.update("dev").mustSucceed(t, "update without a message")
	if got, cli := r.result.GetSummary().GetMessage(), recorded(); got != "Greet in French" || got != cli {
		t.Errorf("update without a message: summary message %q, the CLI recorded %q; want both %q", got, cli, "Greet in French")
	}
	checkHistoryAnswered(t, h, 1)

	h.setUp("dev", warmConfig(path, "salut")...)
	r = h.up(&agentpb.UpRequest{ShowSecrets: true, Message: "by hand"}).mustSucceed(t, "update with a message")
	if got := r.result.GetSummary().GetMessage(); got != "by hand" {
		t.Errorf("update with a message: summary message %q; want %q", got, "by hand")
	}
}
