// Package pullrequest previews the open pull requests of Pipelines that
// set spec.pullRequests, and posts what each would change back to it.
//
// For each open pull request against the Pipeline's branch, the oldest
// maxPreviews at a time, the head commit is previewed against every Stack
// of the stages named: a Workspace built from the Stack's own spec (its
// config, secrets and backend) with the source pinned to the head, and a
// preview Update in it, both owned by the Pipeline. Once all are done,
// one comment on the pull request says what each Stack would change, and
// a commit status (stackyard/preview/<pipeline>) says whether every
// preview succeeded. A new head previews again and edits the same
// comment; a closed pull request's previews are deleted.
//
// A pull request from a fork is not previewed unless allowForks is set:
// the preview runs the pull request's program with the Stacks'
// credentials.
//
// The forge is asked at most every minCheck (a Receiver's wake-ups
// included), and the pull requests are listed, commented on and given
// statuses through internal/forge.
package pullrequest
