// Package source puts a Pulumi program's source into a target directory,
// safely, before Pulumi runs on it.
//
// Three kinds of source are supported: a git repository at a branch or an
// exact commit (FetchGit), a tar.gz artifact verified by digest
// (FetchArtifact, for Flux sources and Program artifacts), and a bare
// project file for destroying a stack whose source is gone (WriteProject).
//
// Every fetch is staged in a temporary directory beside the target and
// renamed into place only when it fully succeeded, so a failed fetch leaves
// the target exactly as it was. Failures are returned as *Error values whose
// Reason tells the caller what happens next: a permanent error needs a human
// to change the spec, a transient one is worth retrying. An *Error's Field
// blames a part of the source in this package's neutral words (FieldURL,
// FieldCommit, ...); each controller maps a Field to its own object's field
// in one place and restates the error with Locate. Credentials never appear
// in error messages or logs.
//
// The operator does not fetch: `stackyard agent init` does, in another
// process. A source crosses that boundary as a Request, credentials
// referred to by file: Request.Args encodes it as the command's flags and
// AddFlags (or DecodeArgs) decodes them, so both sides share one
// definition. A commit and a branch travel in flags of their own; IsCommit
// is the one test of what is a commit.
package source
