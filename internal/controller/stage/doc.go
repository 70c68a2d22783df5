// Package stage is the Stage controller (promotion.stackyard.dev/v1alpha1).
// A Stage is an environment of a Pipeline: Stacks that run one release at
// a time, fed by the pipeline directly or by upstream stages. The
// controller never changes a Stack; it checks the stage's references,
// reports what runs there and how it is, and asks for promotions. The
// Promotion controller (internal/controller/promotion) does the promoting.
//
// Each reconcile runs
//
//	observePromotions → reconcileHealth → reconcileReferences →
//	reconcileAvailability → reconcileAutoPromotion
//
// and writes status once, at the end:
//
//   - currentRelease is the release whose status.currentlyIn names the
//     stage (the Promotion controller moves that entry when a promotion
//     succeeds), and history the succeeded Promotions, newest first, at
//     most 20, kept in status so that they outlive the Promotions'
//     retention;
//   - health sums up the Stacks' kstatus conditions (Healthy, Progressing,
//     Degraded), naming the first Stack that is not healthy;
//   - a missing Pipeline, Stack or upstream Stage is waited for
//     (Reconciling, reason ReferenceNotFound) and stalls once it has been
//     missing longer than the stall bound; an upstream stage of another
//     pipeline, a cycle in the stage graph and
//     a promotion window the operator cannot read stall the stage at once
//     (reason SpecInvalid), each naming its field;
//   - the available releases are the pipeline's (direct) or those verified
//     upstream (stages: all of them with availabilityStrategy All, one with
//     OneOf) for at least requiredSoakTime, timed from the verifications
//     recorded on the Release: the stage is looked at again when a soak
//     ends, never by waiting in a reconcile;
//   - waitingFor says what keeps the next release from being promoted;
//   - with auto-promotion, the chosen release is promoted by creating a
//     Promotion whose name is derived from the stage, the release and the
//     release the stage runs, so a reconcile killed at any line and run
//     again finds the one it created instead of making another.
//
// A release that failed in the stage (status.failedIn) is never promoted
// there automatically again, and NewestRelease never moves a stage back to
// a release older than one it has verified, so a rollback stays until a
// newer release arrives.
//
// The rules this controller shares with the Promotion controller, the CLI
// and the dashboard (availability, the order of releases, health,
// promotion windows) live in internal/change.
package stage
