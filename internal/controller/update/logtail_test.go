package update

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/redact"
)

// engineEvent builds an engine event of type typ with body as its fields.
func engineEvent(t *testing.T, typ string, body map[string]any) *agentpb.EngineEvent {
	t.Helper()
	st, err := structpb.NewStruct(map[string]any{typ: body})
	if err != nil {
		t.Fatal(err)
	}
	return &agentpb.EngineEvent{Type: typ, Event: st}
}

func TestLogTail(t *testing.T) {
	const urn = "urn:pulumi:dev::web::test:index:File::page"
	step := func(op string) map[string]any {
		return map[string]any{"metadata": map[string]any{"op": op, "urn": urn, "type": "test:index:File"}}
	}
	for _, tc := range []struct {
		name    string
		events  func(t *testing.T) []*agentpb.EngineEvent
		secrets []string
		want    []string
	}{{
		name: "steps, diagnostics and the summary, as the CLI prints them",
		events: func(t *testing.T) []*agentpb.EngineEvent {
			return []*agentpb.EngineEvent{
				engineEvent(t, "preludeEvent", map[string]any{"config": map[string]any{}}),
				engineEvent(t, "resourcePreEvent", step("same")),
				engineEvent(t, "resourcePreEvent", step("create")),
				engineEvent(t, "diagnosticEvent", map[string]any{"urn": urn, "severity": "info", "message": "<{%fg 13%}>writing\npage<{%reset%}>\n"}),
				engineEvent(t, "diagnosticEvent", map[string]any{"severity": "info", "message": "progress", "ephemeral": true}),
				engineEvent(t, "resOpFailedEvent", step("update")),
				engineEvent(t, "diagnosticEvent", map[string]any{"severity": "error", "message": "failed on purpose"}),
				engineEvent(t, "summaryEvent", map[string]any{"resourceChanges": map[string]any{"same": 2, "create": 1}, "durationSeconds": 3}),
				engineEvent(t, "cancelEvent", map[string]any{}),
			}
		},
		want: []string{
			"create test:index:File page", "info page: writing", "info page: page", "failed: update page",
			"error: failed on purpose", "summary: create=1 same=2 in 3s", "cancelled",
		},
	}, {
		name: "a summary of nothing",
		events: func(t *testing.T) []*agentpb.EngineEvent {
			return []*agentpb.EngineEvent{engineEvent(t, "summaryEvent", map[string]any{"durationSeconds": 0.5})}
		},
		want: []string{"summary: no changes in 0.5s"},
	}, {
		name: "only the last lines are kept",
		events: func(t *testing.T) []*agentpb.EngineEvent {
			var evs []*agentpb.EngineEvent
			for i := range maxLogLines + 10 {
				evs = append(evs, engineEvent(t, "diagnosticEvent", map[string]any{"severity": "info", "message": fmt.Sprint(i)}))
			}
			return evs
		},
		want: func() []string {
			var lines []string
			for i := 10; i < maxLogLines+10; i++ {
				lines = append(lines, fmt.Sprintf("info: %d", i))
			}
			return lines
		}(),
	}, {
		name: "secret outputs are masked and long lines cut",
		events: func(t *testing.T) []*agentpb.EngineEvent {
			return []*agentpb.EngineEvent{
				engineEvent(t, "diagnosticEvent", map[string]any{"severity": "warning", "message": "the password is hunter2-secret"}),
				engineEvent(t, "diagnosticEvent", map[string]any{"severity": "info", "message": strings.Repeat("é", 400)}),
			}
		},
		want: []string{"warning: the password is [secret]", "info: " + strings.Repeat("é", 251) + "..."},
	}, {
		name: "a secret that spans lines is masked whole",
		events: func(t *testing.T) []*agentpb.EngineEvent {
			return []*agentpb.EngineEvent{
				engineEvent(t, "diagnosticEvent", map[string]any{"severity": "info", "message": "key:\n-----BEGIN KEY-----\nAAAA\n-----END KEY-----\ndone"}),
			}
		},
		secrets: []string{"-----BEGIN KEY-----\nAAAA\n-----END KEY-----"},
		want:    []string{"info: key:", "info: [secret]", "info: done"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var l logTail
			for _, e := range tc.events(t) {
				l.observe(e)
			}
			got := l.Lines(redact.New(append(tc.secrets, "hunter2-secret")...))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			for _, line := range got {
				if len(line) > maxLogLineSize {
					t.Errorf("line of %d bytes", len(line))
				}
			}
		})
	}
}
