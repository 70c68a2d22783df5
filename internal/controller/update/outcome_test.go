package update

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// TestFailure checks how the end of an operation becomes a reason and a
// message.
func TestFailure(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		res         *agentpb.Result
		cause       error
		wantReason  string
		wantMessage string
	}{
		{"conflict", agenterr.New(agenterr.UpdateConflict, "busy"), nil, nil,
			autov1alpha1.UpdateReasonConflict, "UpdateConflict: busy"},
		{"stack locked", status.Error(codes.Aborted, "x"), &agentpb.Result{Error: &agentpb.OperationError{Reason: "StackLocked", Message: "locked by pid 4"}}, nil,
			autov1alpha1.UpdateReasonConflict, "StackLocked: locked by pid 4"},
		{"program error", agenterr.New(agenterr.ProgramError, "syntax"), nil, nil,
			autov1alpha1.UpdateReasonFailed, "ProgramError: syntax"},
		{"result message wins", agenterr.New(agenterr.ResourceFailed, "short"), &agentpb.Result{Error: &agentpb.OperationError{Reason: "ResourceFailed", Message: "long and detailed"}}, nil,
			autov1alpha1.UpdateReasonFailed, "ResourceFailed: long and detailed"},
		{"unknown", status.Error(codes.Internal, "boom"), nil, nil,
			autov1alpha1.UpdateReasonFailed, "boom"},
		{"agent gone", status.Error(codes.Unavailable, "connection reset"), nil, nil,
			ReasonInterrupted, lostAgentMessage},
		{"agent stopped", status.Error(codes.Canceled, "x"), &agentpb.Result{Error: &agentpb.OperationError{Reason: "Cancelled", Message: "the operation was cancelled"}}, nil,
			ReasonInterrupted, stoppedAgentMessage},
		{"shutdown", status.Error(codes.Canceled, "context canceled"), nil, errShutdown,
			ReasonInterrupted, interruptedMessage},
		{"deleted", context.Canceled, nil, errDeleted,
			ReasonCancelled, cancelledMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &outcome{}
			o.failure(tc.err, tc.res, tc.cause)
			if o.reason != tc.wantReason || o.message != tc.wantMessage {
				t.Errorf("reason %q message %q, want %q %q", o.reason, o.message, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

// TestApply writes outcomes into a status with the API's conditions.
func TestApply(t *testing.T) {
	st := &autov1alpha1.UpdateStatus{}
	st.MarkProgressing(autov1alpha1.UpdateReasonInProgress, "running")
	o := &outcome{message: "done", changes: map[string]int32{"create": 2}}
	o.apply(st, 3, "u-stack-outputs", "")
	if !st.IsComplete() || st.IsFailed() || st.Outputs != "u-stack-outputs" || st.Message != "done" || st.ObservedGeneration != 3 {
		t.Errorf("success: %+v", st)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %s observedGeneration %d", c.Type, c.ObservedGeneration)
		}
	}
	o = &outcome{reason: autov1alpha1.UpdateReasonFailed, message: "it broke"}
	o.apply(st, 3, "", "the outputs were not recorded: x")
	if !st.IsFailed() || st.Message != "it broke; the outputs were not recorded: x" || st.Outputs != "" {
		t.Errorf("failure: %+v", st)
	}
}

// TestChangeCollector keeps the steps other than "same", once each, up to
// the cap.
func TestChangeCollector(t *testing.T) {
	step := func(urn, typ, op string, diffs ...any) *agentpb.EngineEvent {
		md := map[string]any{"urn": urn, "type": typ, "op": op,
			"old": map[string]any{"inputs": map[string]any{"content": "old value"}}}
		if diffs != nil {
			md["diffs"] = diffs
		}
		ev, err := structpb.NewStruct(map[string]any{"resourcePreEvent": map[string]any{"metadata": md}})
		if err != nil {
			t.Fatal(err)
		}
		return &agentpb.EngineEvent{Type: "resourcePreEvent", Event: ev}
	}
	c := &changeCollector{}
	c.observe(step("urn:a", "t:a", "create"))
	c.observe(step("urn:a", "t:a", "create"))
	c.observe(step("urn:b", "t:b", "same"))
	c.observe(&agentpb.EngineEvent{Type: "diagnosticEvent"})
	c.observe(step("urn:c", "t:c", "update", "path", "content", "content"))
	for i := range maxResourceChanges + 5 {
		c.observe(step(fmt.Sprintf("urn:%d", i), "t", "update"))
	}
	want := []autov1alpha1.ResourceChange{
		{URN: "urn:a", Type: "t:a", Op: "create"},
		{URN: "urn:c", Type: "t:c", Op: "update", Properties: []string{"content", "path"}},
	}
	if len(c.resources) != maxResourceChanges || !c.truncated || !reflect.DeepEqual(c.resources[:2], want) {
		t.Errorf("collected %d resources, truncated %v, first %+v", len(c.resources), c.truncated, c.resources[:2])
	}
}

// TestDescribeChanges renders counts in a stable order.
func TestDescribeChanges(t *testing.T) {
	if got := describeChanges(map[string]int32{"update": 1, "create": 2, "delete": 0}); got != "create=2 update=1" {
		t.Errorf("describeChanges = %q", got)
	}
	if got := describeChanges(nil); got != "no changes" {
		t.Errorf("describeChanges(nil) = %q", got)
	}
}
