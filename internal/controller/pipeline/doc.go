// Package pipeline is the Pipeline controller (promotion.stackyard.dev):
// release discovery. A Pipeline subscribes to a git repository; every
// interval the controller lists the repository's refs through the poller
// the Stacks share (internal/source.Poller: one `git ls-remote` per
// repository, credentials and interval, however many Pipelines and Stacks
// follow it), finds the versions that are not releases yet, and records
// each as an immutable Release owned by the Pipeline.
//
// Which versions become releases is spec.git.commitSelectionStrategy's:
//
//   - NewestFromBranch: the commits of the branch since the newest
//     release, along first parents (the heads the branch had), at most
//     discoveryLimit of them, read from a shallow in-memory fetch. With
//     includePaths or excludePaths, a commit is a release only if it
//     changes a file that no exclude pattern matches and, with include
//     patterns, that one of them matches. A pattern is a directory prefix
//     or path ("infra", "infra/main.yaml") or a glob ("infra/*.yaml"; one
//     without a slash, such as "*.yaml", also matches base names at any
//     depth).
//   - SemVer: tags that parse as semantic versions ("v1.2.3" or "1.2.3")
//     within semverConstraint, newest version first.
//   - NewestTag: tags, newest commit first.
//   - Lexical: tags, in reverse lexical order of their names.
//
// With the tag strategies, the discoveryLimit newest tags are looked at
// and those newer than the newest existing release become releases; a
// commit tagged twice is one release, recording its newest tag. Releases
// are named "<pipeline>-<first 10 hex digits of the commit>", labelled
// promotion.stackyard.dev/pipeline=<pipeline>, and announced by a
// ReleaseDiscovered event on the Pipeline.
//
// Retention keeps the spec.releaseRetention newest releases (by commit
// time) and never deletes one that a stage runs, that an unfinished
// Promotion names, that is the newest verified in a stage other than the
// one the stage runs (its rollback target), or that is the latest.
//
// The reconcile chain is
//
//	validateSpec → reconcileSource → discoverReleases → createReleases →
//	pruneReleases
//
// with the status computed and patched once at the end (internal/reconcile).
// A bad URL, refused credentials, or a repository or branch that does not
// exist stall the Pipeline with a message naming its field (spec.git.…),
// looked at again every interval; a missing credentials Secret is waited
// for, then stalls; a host that is down is retried with backoff.
package pipeline
