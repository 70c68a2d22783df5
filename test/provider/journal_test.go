package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// readJournal returns the entries of the journal at path.
func readJournal(t *testing.T, path string) []JournalEntry {
	t.Helper()
	entries, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestJournalRecordsWritesOnly drives a File through its lifecycle with
// JournalEnv set: each real create, update and delete is one line with the
// inputs it applied, secrets masked; previews, reads and diffs write none.
func TestJournalRecordsWritesOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	t.Setenv(JournalEnv, path)
	ctx := context.Background()
	p := New()
	urn := testURN + FileType + "::f"
	target := filepath.Join(dir, "f.txt")
	v1 := structOf(t, props(map[string]any{"path": target, "content": "one"}))
	v2 := structOf(t, resource.PropertyMap{
		"path":    resource.NewStringProperty(target),
		"content": resource.MakeSecret(resource.NewStringProperty("two, secret")),
	})

	if _, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: v1, Preview: true}); err != nil {
		t.Fatal(err)
	}
	if got := readJournal(t, path); len(got) != 0 {
		t.Fatalf("a preview was journalled: %+v", got)
	}
	created, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: v1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Update(ctx, &pulumirpc.UpdateRequest{Id: target, Urn: urn, Olds: created.Properties, News: v2, Preview: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(ctx, &pulumirpc.ReadRequest{Id: target, Urn: urn, Properties: created.Properties, Inputs: v1}); err != nil {
		t.Fatal(err)
	}
	updated, err := p.Update(ctx, &pulumirpc.UpdateRequest{Id: target, Urn: urn, Olds: created.Properties, News: v2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Delete(ctx, &pulumirpc.DeleteRequest{Id: target, Urn: urn, Properties: updated.Properties}); err != nil {
		t.Fatal(err)
	}

	got := readJournal(t, path)
	if len(got) != 3 {
		t.Fatalf("journal has %d entries, want 3 (create, update, delete): %+v", len(got), got)
	}
	for i, want := range []struct{ op, content string }{{"create", "one"}, {"update", "[secret]"}, {"delete", "[secret]"}} {
		e := got[i]
		if e.Op != want.op || e.URN != urn || e.Inputs["content"] != want.content || e.PID != os.Getpid() || e.Time.IsZero() {
			t.Errorf("entry %d = %+v, want op %s and content %q", i, e, want.op, want.content)
		}
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), "two, secret") {
		t.Errorf("the journal holds a secret value:\n%s", raw)
	}
}

// TestJournalUnwritableFailsTheWrite checks that a write the journal
// cannot record fails instead of going uncounted.
func TestJournalUnwritableFailsTheWrite(t *testing.T) {
	t.Setenv(JournalEnv, filepath.Join(t.TempDir(), "missing", "journal"))
	urn := testURN + FileType + "::f"
	in := structOf(t, props(map[string]any{"path": filepath.Join(t.TempDir(), "f.txt"), "content": "x"}))
	_, err := New().Create(context.Background(), &pulumirpc.CreateRequest{Urn: urn, Properties: in})
	if err == nil || !strings.Contains(err.Error(), "journal") {
		t.Errorf("create with an unwritable journal returned %v", err)
	}
}

// TestSleepHonoursCustomTimeout checks that the timeout the engine sends
// (the resource's customTimeouts) ends a Sleep with an error saying so.
func TestSleepHonoursCustomTimeout(t *testing.T) {
	urn := testURN + SleepType + "::s"
	in := structOf(t, props(map[string]any{"seconds": 30}))
	_, err := New().Create(context.Background(), &pulumirpc.CreateRequest{Urn: urn, Properties: in, Timeout: 0.2})
	if err == nil || !strings.Contains(err.Error(), "timed out after") {
		t.Fatalf("create with a 0.2 s timeout returned %v", err)
	}
	_, err = New().Update(context.Background(), &pulumirpc.UpdateRequest{Urn: urn, Olds: in, News: in, Timeout: 0.2})
	if err == nil || !strings.Contains(err.Error(), "timed out after") {
		t.Errorf("update with a 0.2 s timeout returned %v", err)
	}
}
