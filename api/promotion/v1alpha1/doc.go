// Package v1alpha1 holds the promotion.stackyard.dev/v1alpha1 API: change
// management for Stacks, built into the operator.
//
//   - A Pipeline subscribes to a git repository and records each new commit
//     on a branch, or each tag matching a constraint, as a Release.
//   - A Release is one immutable version of the program: commit, message,
//     author, time and tag. Its status says where it runs (currentlyIn),
//     where it was verified (verifiedIn) and where it failed (failedIn).
//   - A Stage is an environment: one or more existing Stacks, fed with
//     releases from the pipeline directly or from upstream stages (a graph:
//     fan-out, and fan-in with availabilityStrategy All or OneOf), promoted
//     automatically or by hand, within promotion windows and outside a
//     freeze.
//   - A Promotion moves one release into one stage: it pins the stage's
//     Stacks to the release's commit and follows their Updates to an
//     outcome. Promotions are the audit trail: their spec never changes,
//     and their status, once finished, never changes either.
//
// The vocabulary follows Kargo's (Warehouse → Pipeline, Freight → Release,
// Stage, Promotion) wherever that costs nothing, so that users moving from
// Kargo recognise it: commitSelectionStrategy, semverConstraint,
// includePaths/excludePaths, discoveryLimit, availabilityStrategy,
// requiredSoakTime, autoPromotionOptions.selectionPolicy, currentlyIn and
// verifiedIn.
//
// +kubebuilder:object:generate=true
// +groupName=promotion.stackyard.dev
package v1alpha1
