// Package promotion is the Promotion controller
// (promotion.stackyard.dev/v1alpha1). A Promotion moves one Release into
// one Stage: it pins the stage's Stacks to the release's commit and
// follows their updates to an outcome, which it records on the Promotion
// (the audit trail) and on the Release (currentlyIn, verifiedIn, failedIn).
//
// # Lifecycle
//
//	Pending → Running → Succeeded | Failed
//	Pending → Aborted
//
// A finished Promotion never changes again; the API server holds it to
// that (a CEL transition rule on its status), and its spec never changes
// at all.
//
// # The queue rule
//
// One Promotion runs per stage at a time, and a Running one is never
// interrupted. Of the Pending promotions of a stage, the newest (by
// creationTimestamp, then name) runs next; the older ones are Aborted
// with the message "superseded by <name>". The decision to start is taken
// on a live list of the stage's promotions (spec.stage is a selectable
// field), by one worker, so two promotions of a stage never run at once
// even when the cache lags.
//
// # Refusals
//
// A Pending promotion is Aborted, with a message naming the field, when
// spec.stage names no Stage, or a frozen one (the message carries the
// freeze's reason); when spec.release names no Release, or one of another
// pipeline; when a rollback names a release never verified in the stage;
// or when a Stack of the stage is bound to an older stage. Outside the
// stage's promotion windows it stays Pending, and is looked at again when
// the next window opens.
//
// # Running
//
// Each reconcile runs
//
//	reconcileRequest → reconcileQueue → reconcileWindow → startPromotion →
//	pinStacks → observeStacks → recordOutcome → garbageCollect
//
// where each step does nothing in a phase it does not concern.
// startPromotion checks that every Stack can be pinned (git-sourced, not
// tracking spec.branch; a Program-backed Stack is not supported yet),
// records each Stack's previous spec.commit and marks the promotion
// Running; only the next reconcile, once that record is stored, pins the
// Stacks. pinStacks writes spec.commit by server-side apply, with an apply
// configuration holding only that field, under the field manager
// "stackyard-promotion" with forced ownership, so that Argo CD, syncing
// the same Stack manifests with ignoreDifferences for that manager and
// RespectIgnoreDifferences=true, leaves the promoted commit in place (see
// docs/argocd.md). observeStacks waits (woken by the Stacks' changes) until
// every Stack is Ready for its generation with
// status.lastUpdate.lastSuccessfulCommit at the release's commit, or one
// is Stalled or failed an update of that commit.
//
// recordOutcome writes the Release's status first and the Promotion's
// last, so a reconcile killed between the two writes the same again:
// Succeeded sets verifiedIn and currentlyIn for the stage (verification,
// for now, is every Stack Ready at the commit; the checks of the next
// issue add to it) and takes the stage out of currentlyIn of the release
// it replaced; Failed sets failedIn, which keeps auto-promotion from
// trying the release there again. Events PromotionStarted,
// PromotionSucceeded, PromotionFailed and PromotionAborted (the last two
// Warnings) go to the Promotion and the Stage.
//
// # Retention
//
// garbageCollect keeps the Pipeline's spec.promotionRetention finished
// promotions of each stage, newest first, and deletes the older ones.
package promotion
