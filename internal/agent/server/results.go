package server

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// result builds an operation's Result from what its run produced. The
// summary comes from the backend's history when the operation recorded one
// and the agent read it, and is synthesized from the agent's clock
// otherwise (previews, failures, an up whose outputs came from its events);
// a mutating operation's then gets the message the CLI recorded for it
// (defaultMessage). The change counts come from the engine's summary
// event, or the history.
func (s *Server) result(op operation, out outcome, fw *forwarder, start time.Time, rec *agentpb.Recovery, pending []*agentpb.PendingOperation) *agentpb.Result {
	res := &agentpb.Result{
		Summary: &agentpb.UpdateSummary{
			Kind:      op.kind,
			StartTime: timestamppb.New(start),
			EndTime:   timestamppb.Now(),
			Result:    "succeeded",
			Message:   op.message,
		},
		Changes:           map[string]int32{},
		Permalink:         out.permalink,
		Plan:              out.plan,
		PendingOperations: pending,
	}
	if h := out.history; h != nil && h.Kind != "" {
		res.Summary.Kind = h.Kind
		res.Summary.Result = h.Result
		res.Summary.Message = withholdPlanValues(s.secrets.Redact(h.Message))
		// The Automation API passes --message=%q, so the CLI records the
		// message with Go quotes around it; give back what was asked.
		if op.message != "" && h.Message == strconv.Quote(op.message) {
			res.Summary.Message = op.message
		}
		res.Summary.Version = int32(h.Version) //nolint:gosec // versions fit
		if t, ok := parseTime(h.StartTime); ok {
			res.Summary.StartTime = timestamppb.New(t)
		}
		if h.EndTime != nil {
			if t, ok := parseTime(*h.EndTime); ok {
				res.Summary.EndTime = timestamppb.New(t)
			}
		}
		if h.ResourceChanges != nil {
			for k, v := range *h.ResourceChanges {
				res.Changes[k] = int32(v) //nolint:gosec // counts fit
			}
		}
	} else if op.mutating && op.message == "" {
		res.Summary.Message = withholdPlanValues(s.secrets.Redact(defaultMessage(s.opts.WorkDir)))
	}
	changes := out.changes
	if fw != nil && fw.summary != nil && len(fw.summary.ResourceChanges) > 0 {
		changes = fw.summary.ResourceChanges
	}
	if len(changes) > 0 {
		res.Changes = countsOf(changes)
	}
	if out.outputs != nil {
		res.Outputs = s.outputs(out.outputs, op.showSecrets)
	}
	if rec != nil {
		// A clearing that failed is reported too (ClearingPendingOperations).
		res.Recovery = proto.Clone(rec).(*agentpb.Recovery)
	}
	return res
}

// countsOf converts the engine's change counts.
func countsOf(in map[apitype.OpType]int) map[string]int32 {
	out := make(map[string]int32, len(in))
	for k, v := range in {
		out[string(k)] = int32(v) //nolint:gosec // counts fit
	}
	return out
}

// outputs converts stack outputs. A secret output keeps its value only when
// showSecrets is set; otherwise it is sent as a bare secret marker, and its
// value joins the redactor so that it cannot leak through a message later.
func (s *Server) outputs(in auto.OutputMap, showSecrets bool) map[string]*agentpb.OutputValue {
	out := make(map[string]*agentpb.OutputValue, len(in))
	for k, v := range in {
		if v.Secret {
			s.rememberSecret(v.Value)
			if !showSecrets {
				out[k] = &agentpb.OutputValue{Secret: true}
				continue
			}
		}
		out[k] = &agentpb.OutputValue{Value: toValue(v.Value), Secret: v.Secret}
	}
	return out
}

// rememberSecret adds a secret output's value, and the parts of a
// structured one, to the redactor.
func (s *Server) rememberSecret(v any) {
	switch t := v.(type) {
	case string:
		s.secrets.Add(t)
	case nil:
	default:
		if b, err := json.Marshal(t); err == nil {
			s.secrets.AddJSON(string(b))
		}
	}
}

// toValue converts a decoded JSON value; anything structpb cannot hold is
// sent as its JSON text.
func toValue(v any) *structpb.Value {
	if pv, err := structpb.NewValue(v); err == nil {
		return pv
	}
	b, err := json.Marshal(v)
	if err != nil {
		return structpb.NewNullValue()
	}
	return structpb.NewStringValue(string(b))
}

// parseTime reads a time from the CLI's history.
func parseTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999 -0700 MST"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
