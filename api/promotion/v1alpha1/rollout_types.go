package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Rollout says how a promotion into a stage deploys the stage's Stacks:
// in waves, a few Stacks at a time, halting when more of them fail than
// the failure budget allows. Without it, a promotion pins every Stack at
// once and fails at the first Stack that fails.
type Rollout struct {
	// Waves say how many Stacks have been deployed once each wave is
	// done, counted from the first Stack: a count ("1", or 1) or a
	// percentage of the Stacks the stage deploys ("10%"), rounded up,
	// with at least one Stack in each wave. ["1", "10%", "50%"] deploys
	// one Stack, then up to a tenth of them, then up to half, then the
	// rest: a last wave of every Stack follows when the list does not end
	// with it, and a wave that would add no Stack is skipped. Unset: one
	// wave of every Stack. At most 6 entries (7 waves with the last).
	// +optional
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:XValidation:rule="self.all(w, type(w) == int ? w >= 1 : w.matches('^[1-9][0-9]*%?$'))",message="each wave is a count of at least 1, or a percentage from 1% to 100%"
	// +kubebuilder:validation:XValidation:rule="self.all(w, type(w) == int || !w.endsWith('%') || size(w) <= 3 || w == '100%')",message="each wave is a count of at least 1, or a percentage from 1% to 100%"
	Waves []intstr.IntOrString `json:"waves,omitempty"`

	// MaxParallel is how many Stacks of a wave update at once: the next
	// Stack of the wave is pinned once one of them has finished. Unset or
	// 0: every Stack of the wave at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxParallel int32 `json:"maxParallel,omitempty"`

	// MaxParallelPreviews is how many Stacks a promotion previews at once,
	// before anything changes: the next Stack is previewed once one of
	// their previews has ended. Each preview runs a Workspace of its own.
	// Unset or 0: 20 at once (a stage without spec.rollout too).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxParallelPreviews int32 `json:"maxParallelPreviews,omitempty"`

	// FailureBudget is how many Stacks may fail before the rollout halts:
	// a count, or a percentage of the Stacks the stage deploys, rounded
	// down. Unset or 0: the first Stack that fails halts it. A halted
	// promotion pins no more Stacks; the Stacks it pinned finish, and it
	// waits, Running with status.reason Halted, until someone resumes or
	// aborts it (an Intervention). A failed Stack whose own retry deploys
	// the release counts as succeeded again; a Resume while more Stacks
	// are still failed than the budget allows halts again at once. Once no
	// Stack is left to pin, a rollout within the budget succeeds and one
	// beyond it fails. Without spec.rollout a failed Stack fails the
	// promotion instead.
	// +optional
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%?$') && (!self.endsWith('%') || size(self) <= 3 || self == '100%')",message="a count of at least 0, or a percentage from 0% to 100%"
	FailureBudget *intstr.IntOrString `json:"failureBudget,omitempty"`

	// PauseBetweenWaves is how long a promotion waits after a wave has
	// deployed before it pins the next one, e.g. "10m".
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	PauseBetweenWaves *metav1.Duration `json:"pauseBetweenWaves,omitempty"`

	// VerifyEachWave runs the stage's verification checks
	// (spec.verification.checks) once each wave but the last has deployed,
	// against the wave just done, before the pause and the next wave: the
	// next wave begins only once they pass. A check that fails halts the
	// rollout (status.reason Halted), and a Resume runs that wave's checks
	// again from the start. A Job check's containers find the wave in
	// their environment: STACKYARD_PROMOTION names the Promotion and
	// STACKYARD_WAVE the wave, whose Stacks are those of the Promotion's
	// status.stacks with that wave. The checks after the last wave are
	// the promotion's verification, as without waves, and only a failure
	// there rolls the stage back (rollbackOnFailure). Needs
	// spec.verification.checks.
	// +optional
	VerifyEachWave bool `json:"verifyEachWave,omitempty"`

	// ApproveEachWave makes each wave but the first wait for approvals of
	// its own, once the wave before it has deployed, passed its checks
	// (verifyEachWave) and paused. They are counted under the stage's
	// approval policy (spec.approval) as it was when the promotion
	// started (status.rollout.approvalPolicy); the policy rules that fired
	// on the previews are the promotion's, not its waves'. What counts:
	// Approvals that name the promotion, its plan digest and the wave
	// (spec.wave), created in the second the wave began to wait or later,
	// so that approvers decide on what the waves before did. An eligible
	// rejection of the wave counts whenever it was made, and ends the
	// promotion Aborted: no more Stacks are pinned, and its message says
	// which release each Stack runs. An automatic rollback skips these
	// approvals where the policy says skipForRollback. The first wave goes
	// with the promotion's own approval. `stackyard approve` and the
	// dashboard decide on the wave that waits. Needs spec.approval.
	// +optional
	ApproveEachWave bool `json:"approveEachWave,omitempty"`

	// Order says which Stacks go first. Unset: by name. Labels are
	// anyone's to write who may edit a Stack: ordered by label, such a
	// person can move a Stack to another wave before a promotion starts
	// (never into the stage, nor past its gates). Order by Name or Random
	// where only governors should decide which Stacks go first.
	// +optional
	Order *RolloutOrder `json:"order,omitempty"`
}

// RolloutOrderBy names how a rollout orders the stage's Stacks.
//
// +kubebuilder:validation:Enum=Name;Label;Random
type RolloutOrderBy string

const (
	// OrderByName: by the Stacks' names.
	OrderByName RolloutOrderBy = "Name"
	// OrderByLabel: by the value of one label (order.label), then by
	// name; Stacks without the label go last.
	OrderByLabel RolloutOrderBy = "Label"
	// OrderByRandom: a random order that is the same for the same seed
	// and the same Stacks (order.seed; each Stack's place is a hash of the
	// seed and its name, so a Stack joining the stage moves no other).
	OrderByRandom RolloutOrderBy = "Random"
)

// RolloutOrder says which Stacks of a rollout go first.
//
// +kubebuilder:validation:XValidation:rule="self.by == 'Label' ? has(self.label) : !has(self.label)",message="label: set it with by Label, and only then",fieldPath=".label"
// +kubebuilder:validation:XValidation:rule="self.by == 'Random' || !has(self.seed)",message="seed: set it only with by Random",fieldPath=".seed"
type RolloutOrder struct {
	// By is Name, Label or Random.
	By RolloutOrderBy `json:"by"`

	// Label is the label key whose values order the Stacks with by Label,
	// e.g. "stackyard.dev/ring": "0" goes before "1". Values compare as
	// numbers when both are numbers, as text otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Label string `json:"label,omitempty"`

	// Seed makes another random order with by Random; unset, the stage's
	// name is the seed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Seed string `json:"seed,omitempty"`
}

// RolloutStackState is where one Stack is in a promotion's rollout.
//
// +kubebuilder:validation:Enum=Pending;Updating;Succeeded;Failed;Skipped
type RolloutStackState string

const (
	// StackPending: its wave has not reached it yet; nothing changed on it.
	StackPending RolloutStackState = "Pending"
	// StackUpdating: pinned to the release, its update runs.
	StackUpdating RolloutStackState = "Updating"
	// StackSucceeded: Ready at the release's commit.
	StackSucceeded RolloutStackState = "Succeeded"
	// StackFailed: its update of the release failed, or it stalled.
	StackFailed RolloutStackState = "Failed"
	// StackSkipped: the promotion ended before its wave reached it; it
	// runs what it ran before (previousCommit).
	StackSkipped RolloutStackState = "Skipped"
)

// RolloutCounts counts a rollout's Stacks by state.
type RolloutCounts struct {
	Pending   int32 `json:"pending"`
	Updating  int32 `json:"updating"`
	Succeeded int32 `json:"succeeded"`
	Failed    int32 `json:"failed"`
	Skipped   int32 `json:"skipped"`
}

// Add counts one Stack in state; an empty state (a promotion recorded
// before rollouts had states, whose Stacks were all pinned) counts as
// Updating.
func (c *RolloutCounts) Add(state RolloutStackState) {
	switch state {
	case StackPending:
		c.Pending++
	case StackSucceeded:
		c.Succeeded++
	case StackFailed:
		c.Failed++
	case StackSkipped:
		c.Skipped++
	default:
		c.Updating++
	}
}

// PromotionReasonHalted is status.reason of a Running promotion whose
// rollout halted: its failure budget is spent, or someone halted it. It
// pins no more Stacks until it is resumed or aborted.
const PromotionReasonHalted = "Halted"

// RolloutStatus is a promotion's progress through the stage's waves.
type RolloutStatus struct {
	// Spec is the stage's spec.rollout when the promotion started: the
	// promotion follows it (the waves, maxParallel, the pause, whether a
	// failure halts or fails), whatever changes on the stage later. Unset
	// for a stage without one, whose status.rollout only records
	// Interventions.
	// +optional
	Spec *Rollout `json:"spec,omitempty"`

	// Waves is how many waves the rollout has.
	Waves int32 `json:"waves"`

	// Wave is the wave in progress, from 1; Waves once the last one
	// began.
	// +optional
	Wave int32 `json:"wave,omitempty"`

	// WaveStartTime is when the wave in progress began.
	// +optional
	WaveStartTime *metav1.Time `json:"waveStartTime,omitempty"`

	// NextWaveTime is when the next wave begins, once the wave in
	// progress has deployed and the stage pauses between waves.
	// +optional
	NextWaveTime *metav1.Time `json:"nextWaveTime,omitempty"`

	// FailureBudget is how many Stacks may fail before the rollout halts,
	// computed from the stage's spec.rollout.failureBudget when the
	// promotion started.
	FailureBudget int32 `json:"failureBudget"`

	// Counts are the Stacks by state.
	Counts RolloutCounts `json:"counts"`

	// Verification is the stage's checks run against the last wave that
	// deployed, with spec.verifyEachWave: running, passed (the next wave
	// may begin) or failed (the rollout halted). A later wave's checks
	// replace it.
	// +optional
	Verification *WaveVerification `json:"verification,omitempty"`

	// ApprovalPolicy is the stage's spec.approval when the promotion
	// started, with spec.approveEachWave: its waves are approved under it,
	// whatever changes on the stage later.
	// +optional
	ApprovalPolicy *ApprovalPolicy `json:"approvalPolicy,omitempty"`

	// Approval is the approval the next wave waits for, with
	// spec.approveEachWave: which wave, since when approvals count, and
	// the decisions that count. A later wave's replaces it.
	// +optional
	Approval *WaveApproval `json:"approval,omitempty"`

	// Halted says why the rollout halted, while it is halted.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Halted string `json:"halted,omitempty"`

	// Halts are the rollout's halts, oldest first, at most 16: when, why,
	// and who halted it (empty when its failure budget did).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Halts []RolloutHalt `json:"halts,omitempty"`

	// Interventions are the Interventions the promotion acted on (halt,
	// resume, abort), oldest first: who, what and when. At most the last
	// 32 are kept; lastIntervention says where the promotion is in them.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Interventions []InterventionRecord `json:"interventions,omitempty"`

	// Aborted is the Intervention that aborted the promotion, once one
	// did: it pins no more Stacks, and ends once none updates.
	// +optional
	Aborted *InterventionRecord `json:"aborted,omitempty"`

	// LastIntervention is the newest Intervention the promotion acted on,
	// by name and creation time: it acts only on those created after it
	// (in the order of their creation, then of their names).
	// +optional
	LastIntervention *InterventionCursor `json:"lastIntervention,omitempty"`
}

// WaveVerification is one run of the stage's checks against a wave.
type WaveVerification struct {
	// Wave is the wave checked.
	// +kubebuilder:validation:Minimum=1
	Wave int32 `json:"wave"`

	// Attempt counts the runs of this wave's checks, from 1: a Resume
	// after they failed runs them again.
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt"`

	VerificationStatus `json:",inline"`
}

// WaveApproval is the approval one wave of a rollout waits for.
type WaveApproval struct {
	// Wave is the wave that waits.
	// +kubebuilder:validation:Minimum=2
	Wave int32 `json:"wave"`

	// Since is when the wave began to wait (the wave before it had
	// deployed, passed its checks and paused), to the second: only
	// Approvals created in that second or later count; a rejection counts
	// whenever it was made.
	Since metav1.Time `json:"since"`

	// Approvals are the decisions that count, oldest first.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Approvals []ApprovalRecord `json:"approvals,omitempty"`

	// ApprovedTime is when enough approvals counted and the wave could
	// begin.
	// +optional
	ApprovedTime *metav1.Time `json:"approvedTime,omitempty"`
}

// InterventionCursor names the newest Intervention a promotion acted on.
type InterventionCursor struct {
	// Name is the Intervention's name.
	Name string `json:"name"`
	// Created is its creation time.
	Created metav1.Time `json:"created"`
}

// InterventionRecord is one Intervention as a promotion acted on it.
type InterventionRecord struct {
	// Intervention is the Intervention object.
	Intervention string `json:"intervention"`
	// Action is Halt, Resume or Abort.
	Action InterventionAction `json:"action"`
	// User is who asked, as the API server authenticated them.
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user"`
	// Reason is the user's words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// Time is when the promotion acted on it.
	Time metav1.Time `json:"time"`
}

// RolloutHalt is one halt of a rollout.
type RolloutHalt struct {
	// Time is when the rollout halted.
	Time metav1.Time `json:"time"`
	// Reason says why.
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// By is who halted it, as the API server authenticated them; empty
	// when its failure budget was spent.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	By string `json:"by,omitempty"`
}
