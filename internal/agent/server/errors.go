package server

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
)

// maxMessage bounds an error message; the full CLI output stays in the
// agent's log.
const maxMessage = 4096

// diagnostic is an error diagnostic the engine reported during an
// operation, taken from its event stream.
type diagnostic struct {
	urn     string
	message string
	// stderr marks text a plugin or program wrote to its stderr (severity
	// "info#err"): it often explains a failure, but may be noise too.
	stderr bool
}

// stackResourceType is the type token of a stack's root resource; errors
// attached to it come from the program or the engine, not a resource.
const stackResourceType = "pulumi:pulumi:Stack"

// textRule maps text found in the CLI's output to a reason. Rules are tried
// in order, so specific causes come before generic ones.
type textRule struct {
	reason  agenterr.Reason
	pattern *regexp.Regexp
}

var textRules = []textRule{
	{agenterr.PlanViolation, regexp.MustCompile(`violates plan`)},
	{agenterr.StackLocked, regexp.MustCompile(`the stack is currently locked by`)},
	{agenterr.UpdateConflict, regexp.MustCompile(`\[409\] Conflict|[Aa]nother update is currently in progress`)},
	{agenterr.InvalidAccessToken, regexp.MustCompile(`(?i)invalid access token|\[401\]|unauthorized: no credentials|PULUMI_ACCESS_TOKEN must be set`)},
	{agenterr.ProjectNotFound, regexp.MustCompile(`no Pulumi\.yaml project file found|no Pulumi project found|could not find Pulumi\.yaml|failed to find current Pulumi project|unable to find project settings`)},
	{agenterr.StackNotFound, regexp.MustCompile(`no stack named .* found|stack .* does not exist`)},
	{agenterr.StackAlreadyExists, regexp.MustCompile(`stack .* already exists`)},
	{agenterr.UnexpectedChanges, regexp.MustCompile(`no changes were expected (for \w+ )?but changes`)},
	{agenterr.InvalidConfig, regexp.MustCompile(`invalid configuration key|as a configuration key|missing configuration value|[Mm]issing required configuration|validating stack config|[Cc]onfiguration key .* is not namespaced`)},
	{agenterr.MissingPlugin, regexp.MustCompile(`no resource plugin '[^']*' found|no language plugin|could not find (installed )?plugin|failed to load language plugin|failed to locate compatible plugin|plugin .* not found`)},
	{agenterr.Unsupported, regexp.MustCompile(`does not support environments|not supported by this backend`)},
	{agenterr.ProgramError, regexp.MustCompile(`could not unmarshal .*Pulumi\.yaml|could not validate .*Pulumi\.yaml|invalid YAML file|an unhandled error occurred|failed with an unhandled exception|panic: runtime error|Build FAILED|Unable to compile TypeScript|program exited with non-zero exit code`)},
}

// fail converts err from a call that ran the CLI into an *agenterr.Error
// with a reason and a concise, redacted message. diags are the error
// diagnostics an operation's events carried, nil for other calls.
func (s *Server) fail(ctx context.Context, err error, diags []diagnostic) *agenterr.Error {
	var e *agenterr.Error
	if errors.As(err, &e) {
		return &agenterr.Error{Reason: e.Reason, Message: s.secrets.Redact(e.Message), Metadata: e.Metadata}
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return agenterr.New(agenterr.Cancelled, "the operation was cancelled")
	}
	head, stdout, stderr := splitAutoError(withholdPlanValues(err.Error()))
	reason := classify(err, head+"\n"+stdout+"\n"+stderr, diags)
	if reason == agenterr.StackNotFound {
		// A stack the agent knew has gone (removed behind its back): what
		// it knew about its stacks no longer holds.
		s.forgetWarmth()
	}
	msg := s.secrets.Redact(conciseMessage(head, stderr, diags))
	s.log.V(1).Info("pulumi failed", "reason", string(reason), "stderr", s.secrets.Redact(stripANSI(stderr)))
	return agenterr.New(reason, "%s", msg)
}

// classify finds the reason for a CLI failure from the Automation API's
// predicates, the CLI's text and the engine's diagnostics.
func classify(err error, text string, diags []diagnostic) agenterr.Reason {
	var all strings.Builder
	all.WriteString(stripANSI(text))
	for _, d := range diags {
		all.WriteString("\n")
		all.WriteString(d.message)
	}
	full := all.String()
	for _, r := range textRules {
		if r.pattern.MatchString(full) {
			return r.reason
		}
	}
	switch {
	case auto.IsConcurrentUpdateError(err):
		return agenterr.UpdateConflict
	case auto.IsSelectStack404Error(err):
		return agenterr.StackNotFound
	case auto.IsCreateStack409Error(err):
		return agenterr.StackAlreadyExists
	case auto.IsCompilationError(err), auto.IsRuntimeError(err):
		return agenterr.ProgramError
	}
	// An error on a resource means the engine ran the program and a
	// resource operation failed; an error on the stack alone (other than
	// the engine's closing "update failed") is the program's.
	onResource, onStack := false, false
	for _, d := range diags {
		switch {
		case d.stderr:
		case d.urn != "" && !strings.Contains(d.urn, "::"+stackResourceType+"::"):
			onResource = true
		case !isClosingDiagnostic(d.message):
			onStack = true
		}
	}
	switch {
	case onResource:
		return agenterr.ResourceFailed
	case onStack:
		return agenterr.ProgramError
	}
	// A language host reports a program it cannot run (a type error in a
	// YAML program, say) on its stderr only.
	for _, d := range diags {
		if m := strings.TrimSpace(d.message); d.stderr && m != "" && !strings.HasPrefix(m, "warning:") {
			return agenterr.ProgramError
		}
	}
	return agenterr.Unknown
}

// isClosingDiagnostic reports whether msg is the engine's summary error
// that follows every failed operation.
func isClosingDiagnostic(msg string) bool {
	m := strings.TrimSpace(msg)
	for _, kind := range []string{"update", "preview", "refresh", "destroy"} {
		if m == kind+" failed" {
			return true
		}
	}
	return strings.HasPrefix(m, "update canceled") || strings.HasPrefix(m, "preview canceled")
}

// splitAutoError splits the text of an Automation API error ("<err>\ncode:
// N\nstdout: ...\nstderr: ...") into its parts. Text in another shape is
// returned whole as the head.
func splitAutoError(text string) (head, stdout, stderr string) {
	i := strings.Index(text, "\ncode: ")
	if i < 0 {
		return text, "", ""
	}
	head, rest := text[:i], text[i:]
	if j := strings.Index(rest, "\nstdout: "); j >= 0 {
		rest = rest[j+len("\nstdout: "):]
		if k := strings.LastIndex(rest, "\nstderr: "); k >= 0 {
			stdout, stderr = rest[:k], rest[k+len("\nstderr: "):]
		} else {
			stdout = rest
		}
	}
	return head, stdout, stderr
}

// conciseMessage builds the message of a failed call: the engine's error
// diagnostics when there are any (they name the resource and the cause),
// else what the program wrote to stderr, else the CLI's error lines, else
// the Automation API's summary.
func conciseMessage(head, stderr string, diags []diagnostic) string {
	var errs, written []string
	for _, d := range diags {
		m := strings.TrimSpace(stripANSI(d.message))
		switch {
		case m == "":
		case d.stderr:
			if !strings.HasPrefix(m, "warning:") {
				written = append(written, m)
			}
		case isClosingDiagnostic(m) && len(diags) > 1:
		default:
			if d.urn != "" {
				m = resourceName(d.urn) + ": " + m
			}
			errs = append(errs, m)
		}
	}
	// The engine's own errors explain the failure best; a program's stderr
	// is the next best thing.
	parts := errs
	if len(parts) == 0 || len(parts) == 1 && isClosingDiagnostic(parts[0]) {
		parts = append(written, parts...)
	}
	if len(parts) == 0 {
		for _, line := range strings.Split(stripANSI(stderr), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "warning:") {
				parts = append(parts, line)
			}
		}
	}
	if len(parts) == 0 {
		parts = append(parts, strings.TrimSpace(head))
	}
	msg := strings.Join(parts, "\n")
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	return msg
}

// resourceName shortens a URN to "type name" for messages.
func resourceName(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return urn
	}
	typ := parts[len(parts)-2]
	if i := strings.LastIndex(typ, "$"); i >= 0 {
		typ = typ[i+1:]
	}
	return typ + " " + parts[len(parts)-1]
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// stripANSI removes terminal colour codes.
func stripANSI(s string) string { return ansiEscape.ReplaceAllString(s, "") }
