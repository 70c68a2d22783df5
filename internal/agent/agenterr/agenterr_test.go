package agenterr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
)

// TestReasonRoundTrip checks that a reason survives the trip through a gRPC
// status, which is how the operator receives it.
func TestReasonRoundTrip(t *testing.T) {
	sent := agenterr.New(agenterr.InvalidConfig, "bad key %q", "a:b:c").With("key", "a:b:c")
	// What a client sees: a status rebuilt from the wire form.
	received := status.FromProto(sent.GRPCStatus().Proto()).Err()

	if got := status.Code(received); got != codes.InvalidArgument {
		t.Errorf("code = %s; want InvalidArgument", got)
	}
	if got := agenterr.ReasonOf(received); got != agenterr.InvalidConfig {
		t.Errorf("ReasonOf = %s; want InvalidConfig", got)
	}
	if got := agenterr.MetadataOf(received)["key"]; got != "a:b:c" {
		t.Errorf("metadata key = %q", got)
	}
	if got := agenterr.ReasonOf(fmt.Errorf("wrapped: %w", sent)); got != agenterr.InvalidConfig {
		t.Errorf("ReasonOf of a wrapped error = %s", got)
	}
}

func TestReasonOfOtherErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want agenterr.Reason
	}{
		{nil, ""},
		{errors.New("plain"), agenterr.Unknown},
		{context.Canceled, agenterr.Cancelled},
		{status.Error(codes.Canceled, "client went away"), agenterr.Cancelled},
		{status.Error(codes.Internal, "boom"), agenterr.Unknown},
	} {
		if got := agenterr.ReasonOf(tc.err); got != tc.want {
			t.Errorf("ReasonOf(%v) = %s; want %s", tc.err, got, tc.want)
		}
	}
}
