package server

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/redact"
)

// eventSender is the part of an operation's stream the forwarder uses.
type eventSender interface {
	Send(*agentpb.OperationStream) error
}

// forwarder sends the engine events of one CLI run to the caller and keeps
// what the result needs: the error diagnostics and the last summary event.
// The Automation API closes the channel when the run is over; the forwarder
// reads it to the end even after the caller has gone, because the API
// blocks on a full channel.
type forwarder struct {
	events   chan events.EngineEvent
	returned chan struct{}
	done     chan struct{}
	send     eventSender
	secrets  *redact.Set
	log      logr.Logger
	diags    []diagnostic
	summary  *apitype.SummaryEvent
	// pendingWarned is set when the engine warned that the stack's state
	// holds pending operations from an earlier run.
	pendingWarned bool
	// steps counts the resource steps the engine began (ResourcePreEvent).
	steps int
	// stackOutputs are the outputs of the root stack resource, as the
	// engine reported them (secrets masked), once it has; nil before.
	stackOutputs map[string]any
}

// pendingWarning is in the engine's warning about the pending operations
// an update or destroy starts from.
const pendingWarning = "pending operations from previous deployment"

// newForwarder starts forwarding to send; pass its channel to the
// Automation API and call finish once the call has returned.
func newForwarder(send eventSender, secrets *redact.Set, log logr.Logger) *forwarder {
	f := &forwarder{
		events:   make(chan events.EngineEvent, 64),
		returned: make(chan struct{}),
		done:     make(chan struct{}),
		send:     send,
		secrets:  secrets,
		log:      log,
	}
	go f.run()
	return f
}

func (f *forwarder) run() {
	defer close(f.done)
	sendFailed := false
	handle := func(ev events.EngineEvent) {
		if ev.Error != nil {
			f.log.V(1).Info("unreadable engine event", "error", ev.Error.Error())
			return
		}
		f.observe(ev.EngineEvent)
		if sendFailed {
			return
		}
		msg, err := f.toProto(ev.EngineEvent)
		if err != nil {
			f.log.V(1).Info("engine event not forwarded", "error", err.Error())
			return
		}
		if err := f.send.Send(&agentpb.OperationStream{Response: &agentpb.OperationStream_Event{Event: msg}}); err != nil {
			// The caller is gone; keep draining so the run can finish.
			sendFailed = true
		}
	}
	for {
		select {
		case ev, ok := <-f.events:
			if !ok {
				return
			}
			handle(ev)
		case <-f.returned:
			// The run has returned, so the API has closed the channel if it
			// ever used it: drain what is buffered and stop.
			for {
				select {
				case ev, ok := <-f.events:
					if !ok {
						return
					}
					handle(ev)
				default:
					return
				}
			}
		}
	}
}

// finish is called once the Automation API call has returned; it waits
// until every event has been handled. The API closes the channel before it
// returns when it tailed the event log, and never touches it otherwise
// (for example when it failed before starting the CLI), so finish cannot
// rely on the close alone.
func (f *forwarder) finish() {
	close(f.returned)
	<-f.done
}

// observe records error diagnostics, what plugins wrote to stderr, the
// engine's warning about pending operations, the resource steps begun, the
// stack's outputs and the summary.
func (f *forwarder) observe(e apitype.EngineEvent) {
	if d := e.DiagnosticEvent; d != nil {
		switch d.Severity {
		case "error":
			f.diags = append(f.diags, diagnostic{urn: d.URN, message: withholdPlanValues(f.secrets.Redact(d.Message))})
		case "info#err":
			f.diags = append(f.diags, diagnostic{urn: d.URN, message: withholdPlanValues(f.secrets.Redact(d.Message)), stderr: true})
		case "warning":
			if strings.Contains(d.Message, pendingWarning) {
				f.pendingWarned = true
			}
		}
	}
	if e.ResourcePreEvent != nil {
		f.steps++
	}
	if r := e.ResOutputsEvent; r != nil && r.Metadata.Type == stackResourceType {
		if n := r.Metadata.New; n != nil && n.Parent == "" {
			f.stackOutputs = map[string]any{}
			maps.Copy(f.stackOutputs, n.Outputs)
		}
	}
	if e.SummaryEvent != nil {
		sum := *e.SummaryEvent
		f.summary = &sum
	}
}

// eventsWait bounds how long the outputs of a run that has ended wait for
// the end of its events: the CLI closes its event stream before it exits,
// and the Automation API closes the channel once every event is in it, so
// they are normally all there already.
const eventsWait = 5 * time.Second

// outputsSeen waits until every event of the run has been observed (the
// channel closed), and returns the stack outputs the engine reported and
// whether it warned about pending operations. ok is false when the events
// did not end within eventsWait, or held no stack outputs: the outputs
// must then be read from the state.
func (f *forwarder) outputsSeen(ctx context.Context) (outputs map[string]any, pendingWarned, ok bool) {
	timer := time.NewTimer(eventsWait)
	defer timer.Stop()
	select {
	case <-f.done:
	case <-timer.C:
		return nil, false, false
	case <-ctx.Done():
		return nil, false, false
	}
	return f.stackOutputs, f.pendingWarned, f.stackOutputs != nil
}

// toProto converts an event into its wire form: the event-log JSON as a
// Struct, with the type and time pulled out for convenience. The engine
// masks secrets in events; the text still passes through the redactor in
// case a program printed a secret config value.
func (f *forwarder) toProto(e apitype.EngineEvent) (*agentpb.EngineEvent, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	f.secrets.RedactDecoded(m)
	if d, ok := m["diagnosticEvent"].(map[string]any); ok {
		for _, k := range []string{"message", "prefix"} {
			if text, ok := d[k].(string); ok {
				d[k] = withholdPlanValues(text)
			}
		}
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, err
	}
	return &agentpb.EngineEvent{
		Sequence:  int32(e.Sequence), //nolint:gosec // sequence numbers fit
		Timestamp: timestamppb.New(time.Unix(int64(e.Timestamp), 0)),
		Type:      eventType(m),
		Event:     st,
	}, nil
}

// eventType returns the name of the one event field set in the JSON form
// ("resourcePreEvent", ...).
func eventType(m map[string]any) string {
	for k := range m {
		if strings.HasSuffix(k, "Event") {
			return k
		}
	}
	return ""
}
