// Package agenterr defines the machine-readable reasons the workspace agent
// attaches to its errors, and the helpers both sides of the wire use to put
// a reason on a gRPC status and to read it back.
//
// A reason travels as the Reason of a google.rpc.ErrorInfo detail with
// Domain; the gRPC code is derived from it, so callers that only look at
// codes still behave sensibly. The operator decides what to do next from
// the reason alone (retry later, stall until a human acts, ...), never by
// parsing messages.
package agenterr

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo domain of every reason in this package.
const Domain = "agent.stackyard.dev"

// Reason is a machine-readable cause of an agent error.
type Reason string

const (
	// UpdateConflict means the backend refused the operation because another
	// update of the stack is in progress (a 409 from a service backend).
	// Retry later.
	UpdateConflict Reason = "UpdateConflict"
	// AgentBusy means the agent is running another mutating call (one runs
	// at a time, e.g. the Workspace controller's setup while an Update
	// starts). Nothing was done; retry in a moment.
	AgentBusy Reason = "AgentBusy"
	// StackLocked means the stack carries a lock whose holder may still be
	// alive, so the agent did not clear it. Retry later, or a human runs
	// `pulumi cancel` once sure the holder is gone.
	StackLocked Reason = "StackLocked"
	// InvalidAccessToken means the backend rejected the credentials.
	InvalidAccessToken Reason = "InvalidAccessToken"
	// ProgramError means the Pulumi program failed to load, compile or run.
	ProgramError Reason = "ProgramError"
	// ResourceFailed means the engine ran but at least one resource
	// operation failed.
	ResourceFailed Reason = "ResourceFailed"
	// MissingPlugin means a language or resource plugin is not installed and
	// could not be acquired.
	MissingPlugin Reason = "MissingPlugin"
	// StackNotFound means the named stack does not exist.
	StackNotFound Reason = "StackNotFound"
	// StackAlreadyExists means a stack to create exists already.
	StackAlreadyExists Reason = "StackAlreadyExists"
	// NoStackSelected means an operation needs a stack and SelectStack was
	// not called yet.
	NoStackSelected Reason = "NoStackSelected"
	// ProjectNotFound means the workspace has no Pulumi.yaml.
	ProjectNotFound Reason = "ProjectNotFound"
	// InvalidConfig means a configuration key or value is invalid, or a
	// value could not be read from its source.
	InvalidConfig Reason = "InvalidConfig"
	// InvalidArgument means a request field is invalid.
	InvalidArgument Reason = "InvalidArgument"
	// UnexpectedChanges means expect_no_changes was set and the engine
	// found changes: for a preview-only refresh, the stack has drifted.
	UnexpectedChanges Reason = "UnexpectedChanges"
	// PlanViolation means an update held to a plan (UpRequest.plan) would
	// have done something the plan does not allow, because an input
	// (program, configuration, a provider's view of a resource) changed
	// since the preview that saved it. The engine stops before changing the
	// resource concerned; only a new preview, with a new plan, can go on.
	PlanViolation Reason = "PlanViolation"
	// ReadsChanged means the operator checked versions of the Secrets and
	// ConfigMaps the operation reads (readset) other than the ones the
	// agent's environment was built from, or the agent does not know
	// which it was built from. Nothing ran; the agent restarts with the
	// current versions, and the operation is retried.
	ReadsChanged Reason = "ReadsChanged"
	// Unsupported means the backend does not support the request (for
	// example ESC environments on a self-managed backend).
	Unsupported Reason = "Unsupported"
	// Cancelled means the operation was cancelled by the caller or by the
	// agent shutting down.
	Cancelled Reason = "Cancelled"
	// Unknown is every other failure.
	Unknown Reason = "Unknown"
)

// Code returns the gRPC code that goes with r.
func (r Reason) Code() codes.Code {
	switch r {
	case UpdateConflict, StackLocked:
		return codes.Aborted
	case InvalidAccessToken:
		return codes.Unauthenticated
	case ProgramError, ResourceFailed, MissingPlugin, NoStackSelected, ProjectNotFound, UnexpectedChanges, PlanViolation, ReadsChanged:
		return codes.FailedPrecondition
	case StackNotFound:
		return codes.NotFound
	case StackAlreadyExists:
		return codes.AlreadyExists
	case InvalidConfig, InvalidArgument:
		return codes.InvalidArgument
	case Unsupported:
		return codes.Unimplemented
	case Cancelled:
		return codes.Canceled
	default:
		return codes.Unknown
	}
}

// Error is an error with a Reason. The server returns it from handlers;
// GRPCStatus turns it into a status with an ErrorInfo detail, so gRPC sends
// the reason along.
type Error struct {
	// Reason is the machine-readable cause.
	Reason Reason
	// Message is the human-readable text; it must hold no secret.
	Message string
	// Metadata carries structured facts about the failure (for example the
	// offending config key); it must hold no secret either.
	Metadata map[string]string
}

// New returns an *Error with reason and a formatted message.
func New(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// With returns e with key set to value in its metadata.
func (e *Error) With(key, value string) *Error {
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.Metadata[key] = value
	return e
}

// Error implements error.
func (e *Error) Error() string { return string(e.Reason) + ": " + e.Message }

// GRPCStatus converts e into a status whose details hold an ErrorInfo with
// the reason, so the client can read it back with ReasonOf.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.Reason.Code(), e.Message)
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   string(e.Reason),
		Domain:   Domain,
		Metadata: e.Metadata,
	})
	if err != nil {
		return st
	}
	return withInfo
}

// ReasonOf returns the reason an error carries: the Reason of an *Error in
// its chain, the ErrorInfo reason of a gRPC status from this domain, or a
// reason derived from the status code or context error otherwise.
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Cancelled
	}
	st, ok := status.FromError(err)
	if !ok {
		return Unknown
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return Reason(info.GetReason())
		}
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		return Cancelled
	default:
		return Unknown
	}
}

// MetadataOf returns the ErrorInfo metadata of a gRPC status error from
// this domain, or nil.
func MetadataOf(err error) map[string]string {
	var e *Error
	if errors.As(err, &e) {
		return e.Metadata
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info.GetMetadata()
		}
	}
	return nil
}
