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
//	Running → Aborted (an Intervention)
//
// A finished Promotion never changes again; the API server holds it to
// that (a CEL transition rule on its status), and its spec never changes
// at all.
//
// # The queue rule
//
// One Promotion runs per stage at a time, and a Running one is never
// interrupted by another: only a person stops it (an Intervention, see
// Rollouts). Of the Pending promotions of a stage, the newest (by
// creationTimestamp, then name) runs next; the older ones are Aborted
// with the message "superseded by <name>". The decision to start is taken
// on a live list of the stage's promotions (spec.stage is a selectable
// field), while no other promotion of the stage is being reconciled (the
// controller's workers take a lock per stage, held until the status is
// written), so two promotions of a stage never run at once even when the
// cache lags. Promotions of different stages are reconciled at once.
//
// # Refusals
//
// A Pending promotion is Aborted, with a message naming the field, when
// spec.stage names no Stage, or a frozen one (the message carries the
// freeze's reason); when spec.release names no Release, or one of another
// pipeline; when a rollback names a release never verified in the stage;
// or when a Stack of the stage names another stage, or none, in its
// promotion.stackyard.dev/authorized-stage annotation (change.Unauthorized). Outside the
// stage's promotion windows it stays Pending, and is looked at again when
// the next window opens.
//
// # Previews
//
// reconcilePreview runs, for a Pending promotion whose turn has come and
// whose window is open, a `pulumi preview` of the release's commit for
// every Stack of the stage, before anything changes (and before the
// approvals, which approve what the previews showed). Each runs in a
// Workspace of its own, built as the Stack controller builds the Stack's
// (stackrun.Preview, with stackrun.BuildWorkspace and stackrun.SourceAt:
// the Stack's config, secrets, environment and backend, the source pinned
// to the commit), with a preview Update built as the Stack's own
// (stackrun.BuildUpdate), both owned by the promotion, recorded by UID in
// the Stack's StackPromotion, and labelled with PromotionLabel and StackLabel, not
// with the Stack's pulumi.com/stack-name. A Stack running an update is
// previewed once it has finished. The StackPromotion records each outcome:
// counts, and the resources that would change with the names (never the
// values) of the properties that change. An Interrupted or UpdateConflict
// preview is run again (maxPreviewAttempts). At most maxPreviews run at
// once; each preview's Workspace is deleted once it is in, and the Updates
// stay, as the record. A failed
// preview, or a preview Workspace that stalls, fails the promotion and the
// release in the stage with nothing changed. In a preview-only stage
// (spec.previewOnly, whose Stacks another stage deploys) the promotion
// succeeds once previewed and, where the stage requires it, approved,
// which verifies the release there without pinning anything. A promotion that finished while previewing (superseded,
// refused) has its preview Workspaces and unfinished Updates deleted.
//
// # Policy gates
//
// reconcilePolicies judges the previews, once all are in and while the
// promotion is Pending, with the stage's policy rules (spec.policies, CEL
// evaluated by internal/change/policy on names and counts, never values)
// and records each rule's result in status.policies, afresh on every
// reconcile, so that a new preview is judged again. A fired Refuse rule
// fails the promotion and the release in the stage with nothing changed;
// a rule that cannot be judged fails it without blaming the release.
// Fired RequireApproval rules become requirements of the approval tally,
// beside the stage's approval policy and counted on the same Approvals.
//
// # Plans
//
// Each preview saves its update plan (the Update's spec.savePlan); the
// promotion copies it into a Secret of its own, PlanSecretName, named in
// the record's preview.plan, whose sha256 is an input of the plan digest the
// approvals are bound to (planInputs). pinStacks sets, in the same
// server-side apply as spec.commit, the Stack annotations
// stack.PlanAnnotation and stack.PlanCommitAnnotation, which make the
// Stack controller hold its up of that commit to the plan (`pulumi up
// --plan`). An up that would do anything the plan does not allow (an input
// changed since the preview) is refused before it changes that resource,
// "violates plan"; observeStacks then fails the promotion with a message
// asking for a new promotion (new preview, new approvals), without failing
// the release in the stage.
//
// # Running
//
// Each reconcile runs
//
//	reconcileRequest → reconcileQueue → reconcileWindow → reconcilePreview →
//	reconcilePolicies → reconcileApproval → startPromotion →
//	reconcileInterventions → observeStacks → advanceRollout → pinStacks →
//	awaitRollout → verify → recordOutcome → garbageCollect
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
// Succeeded sets verifiedIn and currentlyIn for the stage (every Stack
// Ready at the commit, and the stage's checks passed: see Verification)
// and takes the stage out of currentlyIn of the release it replaced; Failed sets failedIn, which keeps auto-promotion from
// trying the release there again. Events PromotionStarted,
// PromotionSucceeded, PromotionFailed and PromotionAborted (the last two
// Warnings) go to the Promotion and the Stage.
//
// # Rollouts
//
// startPromotion orders the Stacks and gives each its wave
// (change.Order, change.Waves: the stage's spec.rollout, or one wave of
// every Stack without one), all Pending, in status.stacks; with a rollout
// it records status.rollout (the waves, and the failure budget computed
// for this many Stacks). observeStacks follows the Stacks pinned
// (Updating) to Succeeded or Failed; without a rollout the first failure
// fails the promotion, as it always did. advanceRollout then decides:
// more failures than the budget halt the rollout (status.reason Halted,
// an event RolloutHalted), or fail it when nothing is left to pin; a
// halted rollout pins nothing until resumed; otherwise it marks the next
// Stacks of the waves begun Updating (at most maxParallel at once), for
// pinStacks, begins the next wave once the current one has finished and
// pauseBetweenWaves has passed, and succeeds once no Stack is pending or
// updating. awaitRollout returns its wait once pinStacks has pinned what
// it marked, so that a reconcile that waits has pinned everything it
// reached.
//
// reconcileInterventions acts on the Interventions naming the promotion
// and its stage (their user is the one the API server authenticated, with
// the verb operate on the stage: config/policy), oldest first and once
// each, recording them in status.rollout.interventions: Halt halts,
// Resume lifts a halt (a budget still spent halts again at once), Abort
// makes advanceRollout skip the Stacks not reached and, once none
// updates, end the promotion Aborted, naming the release each Stack runs.
// An aborted promotion records nothing on the Release.
//
// # Verification
//
// verify (verify.go, checks.go; the measuring itself is internal/verify)
// runs the stage's spec.verification.checks once observeStacks found
// every Stack deployed, the built-in verification. Each reconcile takes
// the measurements that are due (initialDelay after the start, interval
// after the previous one, at whole seconds as status records them),
// records them in status.verification, and returns a wait until the next
// one: nothing sleeps. An HTTP call runs in a goroutine (probes) so the
// workers never wait for an endpoint; its end wakes the promotion
// through a channel source. A Job check creates a Job owned by the
// Promotion, whose changes wake it. The promotion stays Running, its
// message naming the checks that run. All checks passed: recordOutcome
// goes on, adding the checks to the message. A check failed: the
// promotion fails with the check's message and the release fails in the
// stage (failedIn), so that downstream stages, which take only verified
// releases, never get it; Jobs still running are deleted; with
// rollbackOnFailure, a rollback Promotion of the release verified last in
// the stage is created, named by RollbackName after the failed one (a
// failed rollback is not rolled back in turn). Events
// VerificationSucceeded, VerificationFailed and RollbackRequested (the
// last two Warnings) tell. Header values read from Secrets are sent and
// never written (internal/redact).
//
// Metrics (internal/metrics.Promotions) are recorded once the status
// that holds what they count is stored: finished promotions by stage and
// result, the wait from creation to start of promotions into stages that
// require approvals, and finished checks by stage, check and result.
//
// # Retention
//
// garbageCollect keeps the Pipeline's spec.promotionRetention finished
// promotions of each stage, newest first, and deletes the older ones.
package promotion
