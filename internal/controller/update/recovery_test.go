package update

import (
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

func TestDescribeRecovery(t *testing.T) {
	lock := &agentpb.StackLock{Pid: 42, Hostname: "ws-pod", Why: "process 42 is not running", Timestamp: timestamppb.Now()}
	for _, tt := range []struct {
		name string
		rec  *agentpb.Recovery
		want string
	}{
		{"nothing", nil, ""},
		{"empty", &agentpb.Recovery{}, ""},
		{"a lock", &agentpb.Recovery{ClearedLocks: []*agentpb.StackLock{lock}},
			"cleared 1 stale lock of the stack (pid 42 on ws-pod: process 42 is not running)"},
		{"an update left pending", &agentpb.Recovery{Method: "state edit",
			ClearedPendingOperations: []*agentpb.PendingOperation{{Type: "updating", Urn: "urn:pulumi:dev::p::t::a"}}},
			"cleared 1 pending operation an interrupted run left with state edit (updating urn:pulumi:dev::p::t::a)"},
		{"everything, a create among it", &agentpb.Recovery{
			ClearedLocks: []*agentpb.StackLock{lock, {Pid: 7, Hostname: "ws-pod", Why: "pid 7 now belongs to a process started after the lock was taken"}},
			ClearedPendingOperations: []*agentpb.PendingOperation{
				{Type: "creating", Urn: "urn:pulumi:dev::p::t::a"}, {Type: "deleting", Urn: "urn:pulumi:dev::p::t::b"}},
			RepairedFiles: []string{".pulumi/stacks/p/dev.json.attrs"}},
			"cleared 2 stale locks of the stack (pid 42 on ws-pod: process 42 is not running; pid 7 on ws-pod: pid 7 now belongs " +
				"to a process started after the lock was taken); and cleared 2 pending operations an interrupted run left " +
				"(creating urn:pulumi:dev::p::t::a, deleting urn:pulumi:dev::p::t::b); a pending create may stand for a " +
				"resource that exists and is no longer managed: look for it, and import it if so; and removed 1 damaged file " +
				"of the backend (.pulumi/stacks/p/dev.json.attrs)"},
		{"a create whose clearing did not end", &agentpb.Recovery{Method: "refresh --clear-pending-creates",
			ClearedLocks:              []*agentpb.StackLock{lock},
			ClearingPendingOperations: []*agentpb.PendingOperation{{Type: "creating", Urn: "urn:pulumi:dev::p::t::a"}}},
			"cleared 1 stale lock of the stack (pid 42 on ws-pod: process 42 is not running); and found 1 pending operation " +
				"an interrupted run left, whose clearing with refresh --clear-pending-creates did not finish " +
				"(creating urn:pulumi:dev::p::t::a); a pending create may stand for a resource that exists and is no longer " +
				"managed: look for it, and import it if so"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeRecovery(tt.rec); got != tt.want {
				t.Errorf("describeRecovery:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
