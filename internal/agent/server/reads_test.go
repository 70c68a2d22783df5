package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestOperationRunsOnlyWithTheCheckedReads: an agent whose environment was
// built from a Secret at one version refuses an up the operator checked
// another version for, and one it cannot compare, and runs nothing; it
// runs the up the operator checked its own versions for, and one sent
// without checked versions (nothing was checked).
func TestOperationRunsOnlyWithTheCheckedReads(t *testing.T) {
	h := &harness{t: t, dir: t.TempDir(), backend: t.TempDir(), logs: &testenv.SyncBuffer{},
		reads: readset.Set{"Secret/creds": "41", "ConfigMap/settings": ""}}
	writeFile(t, filepath.Join(h.dir, "Pulumi.yaml"), warmProgram)
	h.start(2 * time.Second)
	path := filepath.Join(t.TempDir(), "greeting.txt")
	h.setUp("dev", warmConfig(path, "v1")...)

	up := func(checked string) opRun {
		ctx := h.ctx()
		if checked != "-" {
			ctx = metadata.AppendToOutgoingContext(ctx, readset.Header, checked)
		}
		return collect(h.client.Up(ctx, &agentpb.UpRequest{}))
	}
	for _, tc := range []struct{ name, checked, want string }{
		{"a Secret written since the agent started", "ConfigMap/settings=;Secret/creds=42", "Secret/creds at resourceVersion 41"},
		{"a ConfigMap the operator did not check", "Secret/creds=41", "ConfigMap/settings, which the operator did not check"},
		{"checked versions the agent cannot read", "Secret/creds", "metadata " + readset.Header},
	} {
		r := up(tc.checked)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("%s: Up = %v; want a refusal saying %q", tc.name, r.err, tc.want)
		}
		if tc.name != "checked versions the agent cannot read" && agenterr.ReasonOf(r.err) != agenterr.ReadsChanged {
			t.Errorf("%s: reason %s; want %s", tc.name, agenterr.ReasonOf(r.err), agenterr.ReadsChanged)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused up ran (%v)", tc.name, err)
		}
	}
	checkGreeting(t, "the up with the agent's own versions",
		up("ConfigMap/settings=;Secret/creds=41;Secret/git-auth=3").mustSucceed(t, "the checked up"), path, "v1")
	h.setUp("dev", warmConfig(path, "v2")...)
	checkGreeting(t, "an up sent without checked versions", up("-").mustSucceed(t, "an unchecked up"), path, "v2")
}

// TestUnknownReadsRefuseACheckedOperation: an agent that was not told which
// versions its environment was built from refuses an operation the
// operator checked versions for.
func TestUnknownReadsRefuseACheckedOperation(t *testing.T) {
	t.Setenv(readset.EnvVar, "") // set, then unset: the agent reads the environment
	if err := os.Unsetenv(readset.EnvVar); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, warmProgram)
	h.setUp("dev", warmConfig(filepath.Join(t.TempDir(), "greeting.txt"), "v1")...)
	ctx := metadata.AppendToOutgoingContext(context.Background(), readset.Header, "Secret/creds=41")
	r := collect(h.client.Up(ctx, &agentpb.UpRequest{}))
	if agenterr.ReasonOf(r.err) != agenterr.ReadsChanged || !strings.Contains(r.err.Error(), "does not know") {
		t.Fatalf("Up = %v; want %s, saying the agent does not know its versions", r.err, agenterr.ReadsChanged)
	}
}
