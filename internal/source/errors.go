package source

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stackyard/stackyard/internal/redact"
)

// Reason is a machine-readable cause of a fetch failure, suitable for a
// status condition's reason.
type Reason string

const (
	// ReasonInvalidSpec means the request itself is wrong (bad URL, field
	// combination, path escaping the tree); a human must fix the spec.
	ReasonInvalidSpec Reason = "InvalidSpec"
	// ReasonUnreachable means the server could not be reached or answered
	// with a server-side failure; retrying later may succeed.
	ReasonUnreachable Reason = "Unreachable"
	// ReasonAuthFailed means the server refused the credentials (or none
	// were given where some are required); a human must fix the secret.
	ReasonAuthFailed Reason = "AuthFailed"
	// ReasonNotFound means the repository, branch, commit, artifact or
	// program directory does not exist.
	ReasonNotFound Reason = "NotFound"
	// ReasonDigestMismatch means a downloaded artifact does not match its
	// declared digest.
	ReasonDigestMismatch Reason = "DigestMismatch"
	// ReasonTooLarge means a download or its extracted content exceeds a
	// configured limit.
	ReasonTooLarge Reason = "TooLarge"
	// ReasonUnsafeArchive means an archive tried to write outside its tree,
	// contained a link escaping it, or held a device or other special file.
	ReasonUnsafeArchive Reason = "UnsafeArchive"
	// ReasonInternal means a local failure such as a full disk; retrying
	// may succeed.
	ReasonInternal Reason = "Internal"
)

// Error is the error every fetch returns. Field names the part of the
// source at fault, which a controller restates as its own object's field
// with Locate; the message does not repeat it and never contains
// credentials. Permanent tells a controller whether to stall (a human must
// act) or to retry with backoff.
type Error struct {
	// Reason classifies the failure.
	Reason Reason
	// Field is the part of the source at fault, e.g. FieldDir or
	// FieldDigest, or FieldNone when no single one is to blame.
	Field Field
	// Permanent is true when retrying the same spec cannot succeed.
	Permanent bool
	// Message is the human-readable explanation, free of secrets.
	Message string

	cause error
}

// Error returns the message, prefixed by the reason and the field at
// fault, if any.
func (e *Error) Error() string {
	if e.Field == FieldNone {
		return string(e.Reason) + ": " + e.Message
	}
	return string(e.Reason) + ": " + string(e.Field) + ": " + e.Message
}

// Unwrap returns the underlying cause, so callers can still match sentinel
// errors such as context.Canceled with errors.Is.
func (e *Error) Unwrap() error { return e.cause }

// ReasonOf returns the Reason of err if it is (or wraps) an *Error, "" for
// nil, and ReasonInternal for any other error.
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonInternal
}

// IsPermanent reports whether err is an *Error that retrying cannot fix.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent
}

// permanentByDefault says which reasons need a human by default. Missing
// refs and digest mismatches are treated as transient: a branch may be
// pushed later and a Flux artifact may be replaced between reading its
// status and downloading it.
var permanentByDefault = map[Reason]bool{
	ReasonInvalidSpec:   true,
	ReasonAuthFailed:    true,
	ReasonTooLarge:      true,
	ReasonUnsafeArchive: true,
}

// newError builds an *Error with the default permanence for reason; the
// message is formatted with format and args.
func newError(reason Reason, field Field, cause error, format string, args ...any) *Error {
	return &Error{
		Reason:    reason,
		Field:     field,
		Permanent: permanentByDefault[reason],
		Message:   fmt.Sprintf(format, args...),
		cause:     cause,
	}
}

// redactor removes known secret values from text. Fetches build one from
// their credentials and pass every message derived from a third-party error
// through it, as a last line of defence. The zero value holds none.
type redactor struct{ set *redact.Set }

// add registers secret values (empty ones are ignored), together with the
// forms in which libraries commonly echo them: trimmed, and each long line
// of a multi-line secret (a PEM key) alone.
func (r *redactor) add(secrets ...string) {
	if r.set == nil {
		r.set = redact.New()
	}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < 4 {
			// Too short to redact without mangling ordinary words; short
			// secrets are never echoed by our own messages anyway.
			continue
		}
		r.set.Add(s)
		for _, line := range strings.Split(s, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 {
				r.set.Add(line)
			}
		}
	}
}

// clean returns text with every registered secret replaced by
// redact.Placeholder.
func (r redactor) clean(text string) string { return r.set.Redact(text) }

// wrap turns cause into an *Error whose message is context followed by the
// redacted cause.
func (r redactor) wrap(reason Reason, field Field, cause error, context string) *Error {
	msg := context
	if cause != nil {
		msg += ": " + r.clean(cause.Error())
	}
	return newError(reason, field, cause, "%s", msg)
}
