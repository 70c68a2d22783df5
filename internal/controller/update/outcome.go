package update

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Reasons of an Update's conditions that the API package does not define
// (yet); the others are autov1alpha1's UpdateReason* constants.
const (
	// ReasonInterrupted says the operation did not run to its end because
	// the operator or the workspace agent stopped while it ran. Nothing
	// about the program is known to be wrong, so retrying is expected: the
	// agent clears the stale lock and pending operations on the next run.
	ReasonInterrupted = autov1alpha1.UpdateReasonInterrupted
	// ReasonCancelled says the Update was deleted while its operation ran,
	// and the operation was cancelled.
	ReasonCancelled = autov1alpha1.UpdateReasonCancelled
)

// Messages of the outcomes the operator, not the agent, decides.
const (
	interruptedMessage  = "the operator stopped while the operation ran; it will be retried"
	cancelledMessage    = "the Update was deleted while the operation ran; the operation was cancelled"
	lostAgentMessage    = "the connection to the workspace agent was lost while the operation ran; it will be retried"
	stoppedAgentMessage = "the workspace agent stopped while the operation ran; it will be retried"
)

// outcome is how one operation ended, as the runner saw it. It may hold
// secret output values (outputs) until they are written to the outputs
// Secret; nothing else in it is secret.
type outcome struct {
	// reason is the Failed condition's reason; empty on success.
	reason string
	// agentReason is the agent's own reason for a failure, for events and
	// logs.
	agentReason agenterr.Reason
	// message describes the outcome; secret values are scrubbed from it.
	message string

	start, end  metav1.Time
	permalink   string
	projectInfo *autov1alpha1.ProjectInfo
	// events counts the engine events the agent streamed.
	events int
	// changes counts resources per operation kind.
	changes map[string]int32
	// outputs are the stack outputs, with secret values in clear text.
	outputs map[string]*agentpb.OutputValue
	// resourceChanges lists what a preview would change; nil for other
	// operations.
	resourceChanges []autov1alpha1.ResourceChange
	// plan is the update plan a preview with spec.savePlan saved.
	plan []byte
	// diff is that preview's value diff (package valuediff), encoded.
	diff []byte
	// logTail is the end of the operation's log, secrets masked.
	logTail []string
	// recovery says what the agent repaired before the operation; empty
	// when nothing.
	recovery string
}

// failed reports whether the operation failed.
func (o *outcome) failed() bool { return o.reason != "" }

// metricsResult is the outcome's result label for Metrics.
func (o *outcome) metricsResult() string {
	switch o.reason {
	case "":
		return ResultSucceeded
	case autov1alpha1.UpdateReasonConflict:
		return ResultConflict
	case ReasonInterrupted:
		return ResultInterrupted
	case ReasonCancelled:
		return ResultCancelled
	default:
		return ResultFailed
	}
}

// failure records err, the error that ended the operation, with the
// agent's Result if one arrived. cause is the cause of the operation's
// context, if it was cancelled by the operator: shutting down makes the
// outcome Interrupted, deleting the Update makes it Cancelled.
func (o *outcome) failure(err error, res *agentpb.Result, cause error) {
	switch {
	case errors.Is(cause, errShutdown):
		o.reason, o.message = ReasonInterrupted, interruptedMessage
		return
	case errors.Is(cause, errDeleted):
		o.reason, o.message = ReasonCancelled, cancelledMessage
		return
	}
	var late timedOut
	if errors.As(cause, &late) {
		o.reason, o.message = autov1alpha1.UpdateReasonFailed, late.Error()
		return
	}
	o.agentReason = agenterr.ReasonOf(err)
	if e := res.GetError(); e != nil && e.GetReason() != "" {
		o.agentReason = agenterr.Reason(e.GetReason())
	}
	msg := res.GetError().GetMessage()
	if msg == "" {
		msg = errorText(err)
	}
	switch {
	case o.agentReason == agenterr.UpdateConflict || o.agentReason == agenterr.StackLocked:
		o.reason = autov1alpha1.UpdateReasonConflict
	case o.agentReason == agenterr.Cancelled:
		// The agent cancelled an operation the operator did not cancel: the
		// agent itself was stopped under it. At shutdown the local runtime
		// stops the agents before the controllers stop, so without this an
		// operator restart was recorded as a failure of the program.
		o.reason, o.message = ReasonInterrupted, stoppedAgentMessage
		return
	case o.agentReason == agenterr.ReadsChanged:
		// Nothing ran. This Update's end wakes its Workspace, whose
		// reconcile starts the agent again with the versions now current;
		// the Stack retries.
		o.reason, o.message = ReasonInterrupted, msg+"; the operation did not start and will be retried"
		return
	case status.Code(err) == codes.Unavailable && o.agentReason == agenterr.Unknown:
		o.reason, o.message = ReasonInterrupted, lostAgentMessage
		return
	default:
		o.reason = autov1alpha1.UpdateReasonFailed
	}
	if o.agentReason != "" && o.agentReason != agenterr.Unknown {
		msg = fmt.Sprintf("%s: %s", o.agentReason, msg)
	}
	o.message = msg
}

// errorText is an error's message without gRPC's "rpc error: code = ..."
// decoration.
func errorText(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// apply writes the outcome into st: the conditions, the times, the message
// (with note appended, if any), the permalink, the project and the name of
// the outputs Secret (empty when there is none).
func (o *outcome) apply(st *autov1alpha1.UpdateStatus, generation int64, outputs, note string) {
	msg := o.message
	if note != "" {
		msg = joinSentences(msg, note)
	}
	if o.failed() {
		st.MarkFailed(o.reason, sreconcile.Truncate(msg, sreconcile.MaxConditionMessage))
	} else {
		st.MarkSucceeded(sreconcile.Truncate(msg, sreconcile.MaxConditionMessage))
	}
	stampConditions(st, generation)
	if st.StartTime.IsZero() {
		st.StartTime = o.start
	}
	st.EndTime = o.end
	st.Message = msg
	st.Permalink = o.permalink
	st.Outputs = outputs
	st.Changes = nil
	if len(o.changes) > 0 {
		st.Changes = make(map[string]int64, len(o.changes))
		for op, n := range o.changes {
			st.Changes[op] = int64(n)
		}
	}
	st.ResourceChanges = o.resourceChanges
	st.LogTail = o.logTail
	if o.projectInfo != nil {
		st.ProjectInfo = o.projectInfo
	}
}

// stampConditions records generation as the status's and every
// condition's observed generation.
func stampConditions(st *autov1alpha1.UpdateStatus, generation int64) {
	st.ObservedGeneration = generation
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = generation
	}
}

// joinSentences joins two messages with "; ", leaving out an empty one.
func joinSentences(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	default:
		return a + "; " + b
	}
}

// describeChanges renders change counts for a person: "create=1 same=2",
// in a stable order; "no changes" when there are none.
func describeChanges(changes map[string]int32) string {
	keys := make([]string, 0, len(changes))
	for k, v := range changes {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "no changes"
	}
	slices.Sort(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s=%d", k, changes[k])
	}
	return out
}

// contextCause returns why ctx was cancelled, or nil while it is not.
func contextCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}
