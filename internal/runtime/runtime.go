// Package runtime decides where a Workspace's agent runs and how the operator
// reaches it. Two implementations share this contract:
//
//   - local (internal/runtime/local): the agent is a subprocess of the
//     operator, one per Workspace, in a state directory on the operator's
//     host; used by `stackyard dev` and by the integration tests;
//   - kubernetes (internal/runtime/kubernetes): the agent runs in a pod built
//     from the Workspace, scaled to zero when no operation is due.
//
// The Workspace controller calls Ensure and Idle; the Update controller calls
// Dial. Neither knows which runtime it drives.
package runtime

import (
	"context"

	"google.golang.org/grpc"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// Runtime runs Workspace agents.
type Runtime interface {
	// Name identifies the runtime ("local", "kubernetes") in logs, events
	// and metrics.
	Name() string

	// Ensure brings the agent of ws up, or keeps it up, with ws's current
	// source and environment, and reports its state. It is idempotent: the
	// Workspace controller calls it on every reconcile. While the agent is
	// starting it returns a Status with Ready false (not an error); it
	// returns a typed error from internal/reconcile when the Workspace
	// cannot be run as written (Stalling) or a dependency is missing
	// (Waiting).
	Ensure(ctx context.Context, ws *autov1alpha1.Workspace) (Status, error)

	// Idle releases the agent's compute while keeping what it needs to
	// start again quickly (the kubernetes runtime scales to zero, the local
	// runtime stops the process). Ensure starts it again on demand.
	Idle(ctx context.Context, ws *autov1alpha1.Workspace) error

	// Delete removes everything the runtime made for ws (processes, state
	// directory, pods). Objects owned by ws through owner references are
	// left to the garbage collector.
	Delete(ctx context.Context, ws *autov1alpha1.Workspace) error

	// Dial connects to ws's agent with the credentials this runtime uses
	// (a per-workspace token locally, a service account token bound to
	// the workspace's audience in a cluster). The caller closes the
	// connection.
	Dial(ctx context.Context, ws *autov1alpha1.Workspace) (*grpc.ClientConn, error)
}

// Status is what Ensure learned about a Workspace's agent.
type Status struct {
	// Ready is true when the agent serves RPCs at Address.
	Ready bool
	// Address is the agent's gRPC address (host:port).
	Address string
	// Revision is the source revision (commit or artifact digest) the
	// agent's project directory holds.
	Revision string
	// Instance identifies the agent's workspace-local state (its project
	// directory with the stack settings written into it). It changes
	// whenever that state may have been lost or no longer fits (a new pod,
	// a fresh fetch of the source, a changed environment), which tells the
	// Workspace controller to set the stacks up again. Opaque; empty while
	// not Ready.
	Instance string
	// Message says, for a person, why the agent is not ready yet.
	Message string
	// Queued is set while the agent waits for a place to run (a runtime
	// that bounds how many run at once, see Contention). The runtime
	// itself asks for the Workspace to be reconciled when its turn comes,
	// so the caller need not poll meanwhile.
	Queued bool
}

// Contention is implemented by runtimes that bound how many agents run at
// once (local). While Workspaces wait for a place, the Workspace controller
// idles an agent as soon as it has nothing pending, instead of keeping it
// warm, so that the next Workspace can start.
type Contention interface {
	// Queued is how many Workspaces wait for a place.
	Queued() int
}

// Liveness is implemented by runtimes whose agents do not outlive the
// operator process (local). After an operator restart a Workspace's status
// still names the agent the previous process ran; Running lets the Update
// controller wait for the Workspace controller to start a new one instead of
// starting an operation that is bound to fail. The kubernetes runtime does
// not need it: its pods survive the operator.
type Liveness interface {
	// Running reports, without a network call, whether the agent the
	// status of ws names (ws.Status.Address) runs now.
	Running(ws *autov1alpha1.Workspace) bool
}
