package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

func TestPipelineFieldCoversEveryField(t *testing.T) {
	for _, f := range append([]source.Field{source.FieldNone}, source.Fields...) {
		if got := pipelineField(f); !strings.HasPrefix(got, "spec.git.") {
			t.Errorf("pipelineField(%q) = %q, want a field under spec.git", f, got)
		}
	}
	for f, want := range map[source.Field]string{
		source.FieldURL:           "spec.git.repoURL",
		source.FieldBranch:        "spec.git.branch",
		source.FieldAuth:          "spec.git.secretRef",
		source.FieldUsername:      "spec.git.secretRef[username]",
		source.FieldSSHPassphrase: "spec.git.secretRef[password]",
	} {
		if got := pipelineField(f); got != want {
			t.Errorf("pipelineField(%q) = %q, want %q", f, got, want)
		}
	}
}

func TestSourceError(t *testing.T) {
	ctx := context.Background()
	_, badURL := source.ListRefs(ctx, "file:///etc", nil)
	_, missingBranch := source.HeadOf(nil, "main")
	unreachable := &source.Error{Reason: source.ReasonUnreachable, Field: source.FieldURL, Message: "connection refused"}
	refused := &source.Error{Reason: source.ReasonAuthFailed, Field: source.FieldAuth, Permanent: true, Message: "credentials were rejected"}
	tests := []struct {
		name       string
		err        error
		stall      bool
		wantPrefix string
	}{
		{name: "bad URL", err: badURL, stall: true, wantPrefix: "spec.git.repoURL: InvalidSpec: "},
		{name: "missing branch", err: missingBranch, stall: true, wantPrefix: "spec.git.branch: NotFound: "},
		{name: "credentials refused", err: refused, stall: true, wantPrefix: "spec.git.secretRef: AuthFailed: "},
		{name: "host down", err: unreachable, wantPrefix: "spec.git.repoURL: Unreachable: "},
		{name: "untyped", err: errors.New("boom"), wantPrefix: "spec.git.repoURL: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sourceError(tt.err, time.Minute)
			if !strings.HasPrefix(got.Error(), tt.wantPrefix) {
				t.Errorf("message %q, want it to begin %q", got, tt.wantPrefix)
			}
			var stall *sreconcile.Stalling
			if errors.As(got, &stall) != tt.stall {
				t.Fatalf("stalls = %v, want %v: %v", !tt.stall, tt.stall, got)
			}
			if tt.stall && stall.RequeueAfter != time.Minute {
				t.Errorf("a stall is looked at again after %s, want the interval", stall.RequeueAfter)
			}
			if sreconcile.Reason(got) != SourceUnavailableReason {
				t.Errorf("reason %q", sreconcile.Reason(got))
			}
		})
	}
}

func TestReleaseNameAndTruncate(t *testing.T) {
	if got := ReleaseName("web", "0123456789abcdef0123456789abcdef01234567"); got != "web-0123456789" {
		t.Errorf("ReleaseName = %q", got)
	}
	if got := truncate("héllo", 2); got != "h" {
		t.Errorf("truncate cut a character: %q", got)
	}
	if got := truncate("hello", 10); got != "hello" {
		t.Errorf("truncate = %q", got)
	}
}
