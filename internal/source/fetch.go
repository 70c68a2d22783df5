package source

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
)

// Spec is one program source, of exactly one kind: the union that
// `stackyard agent init` fills from its flags and Fetch dispatches on.
type Spec struct {
	// Git fetches from a git repository.
	Git *GitSpec
	// Artifact fetches a tar.gz artifact verified by digest.
	Artifact *ArtifactSpec
	// Project writes a bare Pulumi.yaml.
	Project *ProjectSpec
}

// Fetch places the source described by spec at target with FetchGit,
// FetchArtifact or WriteProject, and fails with ReasonInvalidSpec unless
// exactly one kind of source is set.
func Fetch(ctx context.Context, target string, spec Spec) (*Result, error) {
	kinds := 0
	for _, set := range []bool{spec.Git != nil, spec.Artifact != nil, spec.Project != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return nil, newError(ReasonInvalidSpec, FieldNone, nil,
			"set exactly one of a git repository, an artifact or a project (got %d)", kinds)
	}
	switch {
	case spec.Git != nil:
		return FetchGit(ctx, target, *spec.Git)
	case spec.Artifact != nil:
		return FetchArtifact(ctx, target, *spec.Artifact)
	default:
		return WriteProject(ctx, target, *spec.Project)
	}
}

// Revision returns what identifies the fetched content: the commit of a
// git source, the digest of an artifact, "" for a written project.
func (r *Result) Revision() string {
	if r == nil {
		return ""
	}
	if r.Commit != "" {
		return r.Commit
	}
	return r.Digest
}

// Report is the outcome of a fetch in a form another process can read:
// `stackyard agent init` writes it as JSON to its --result-file, which in a
// pod is the init container's termination message, so the operator learns
// the revision fetched, or why the fetch failed and whether retrying can
// help, without parsing logs. It never holds a credential.
type Report struct {
	// Revision is the fetched commit or digest, on success.
	Revision string `json:"revision,omitempty"`
	// Reason classifies a failure; empty on success.
	Reason Reason `json:"reason,omitempty"`
	// Field is the part of the source at fault, when one is.
	Field Field `json:"field,omitempty"`
	// Permanent is true when retrying the same source cannot succeed.
	Permanent bool `json:"permanent,omitempty"`
	// Message explains a failure for a person.
	Message string `json:"message,omitempty"`
}

// maxReportBytes keeps a report within the 4 KiB Kubernetes allows a
// termination message.
const maxReportBytes = 4000

// NewReport describes the outcome of a fetch: res on success, err on
// failure. An error that is not an *Error is reported as ReasonInternal,
// transient.
func NewReport(res *Result, err error) Report {
	if err == nil {
		return Report{Revision: res.Revision()}
	}
	var e *Error
	if errors.As(err, &e) {
		return Report{Reason: e.Reason, Field: e.Field, Permanent: e.Permanent, Message: e.Message}
	}
	return Report{Reason: ReasonInternal, Message: err.Error()}
}

// Failed reports whether the report describes a failure.
func (r Report) Failed() bool { return r.Reason != "" }

// Err turns a failure report back into an *Error (nil for a success), so
// the reader of a report classifies it like an in-process fetch.
func (r Report) Err() error {
	if !r.Failed() {
		return nil
	}
	return &Error{Reason: r.Reason, Field: r.Field, Permanent: r.Permanent, Message: r.Message}
}

// WriteFile writes the report as one line of JSON to path, cutting a long
// message so that the whole fits a termination message.
func (r Report) WriteFile(path string) error {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if len(b) <= maxReportBytes || r.Message == "" {
			return os.WriteFile(path, append(b, '\n'), 0o644)
		}
		cut := len(r.Message) - (len(b) - maxReportBytes) - 3
		if cut <= 0 {
			r.Message = ""
			continue
		}
		r.Message = strings.ToValidUTF8(r.Message[:cut], "") + "..."
	}
}

// ParseReport reads a report written by WriteFile.
func ParseReport(text string) (Report, error) {
	var r Report
	err := json.Unmarshal([]byte(strings.TrimSpace(text)), &r)
	return r, err
}
