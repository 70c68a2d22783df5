package shared

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// StackOutputs maps each stack output name to its value, as JSON.
type StackOutputs map[string]apiextensionsv1.JSON

// StackUpdateStateMessage is the outcome of a stack's last update.
type StackUpdateStateMessage string

const (
	// SucceededStackStateMessage says the last update succeeded.
	SucceededStackStateMessage StackUpdateStateMessage = "succeeded"
	// FailedStackStateMessage says the last update failed.
	FailedStackStateMessage StackUpdateStateMessage = "failed"
)

// Permalink is the address of an operation in Pulumi Cloud.
type Permalink string

// StackUpdateState records the last Update a Stack ran and its outcome.
type StackUpdateState struct {
	// Generation is the Stack's metadata.generation the update ran for.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// ReconcileRequest is the value of the reconcile-request annotation
	// the update ran for.
	// +optional
	ReconcileRequest string `json:"reconcileRequest,omitempty"`

	// Name is the name of the Update object.
	// +optional
	Name string `json:"name,omitempty"`

	// Type is the operation the Update ran: preview, up, destroy or
	// refresh.
	// +optional
	Type autov1alpha1.UpdateType `json:"type,omitempty"`

	// State is the outcome: "succeeded" or "failed".
	// +optional
	State StackUpdateStateMessage `json:"state,omitempty"`

	// Message describes the outcome, e.g. the error of a failed update.
	// +optional
	Message string `json:"message,omitempty"`

	// LastAttemptedCommit is the source revision of the last update tried.
	// +optional
	LastAttemptedCommit string `json:"lastAttemptedCommit,omitempty"`

	// LastSuccessfulCommit is the source revision of the last update that
	// succeeded.
	// +optional
	LastSuccessfulCommit string `json:"lastSuccessfulCommit,omitempty"`

	// Permalink is the address of the operation in Pulumi Cloud; empty for
	// self-managed backends.
	// +optional
	Permalink Permalink `json:"permalink,omitempty"`

	// LastResyncTime is when the update finished.
	// +optional
	LastResyncTime metav1.Time `json:"lastResyncTime,omitempty"`

	// Failures counts the consecutive failed attempts at this update; the
	// wait before the next retry grows exponentially with it.
	// +optional
	Failures int64 `json:"failures,omitempty"`
}

// CurrentStackUpdate records the Update a Stack is running now.
type CurrentStackUpdate struct {
	// Generation is the Stack's metadata.generation the update runs for.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// ReconcileRequest is the value of the reconcile-request annotation
	// the update runs for.
	// +optional
	ReconcileRequest string `json:"reconcileRequest,omitempty"`

	// Name is the name of the Update object.
	// +optional
	Name string `json:"name,omitempty"`

	// UID is the metadata.uid of the Update the operator created, as the
	// API server returned it. An Update under Name with another UID was
	// made by someone else, in its place, and never runs as the Stack's.
	// Empty in records written before stackyard recorded it.
	// +optional
	UID types.UID `json:"uid,omitempty"`

	// Commit is the source revision being deployed.
	// +optional
	Commit string `json:"commit,omitempty"`
}

// ObjectRecord names an object the operator created, with the UID the API
// server returned when it did: an object of that name with another UID is
// someone else's, made in its place.
type ObjectRecord struct {
	// Name is the object's metadata.name.
	Name string `json:"name"`

	// UID is the object's metadata.uid.
	UID types.UID `json:"uid"`
}

// ProjectInfo is the Pulumi project name and runtime a Stack's program
// declared in Pulumi.yaml, remembered so that the stack can still be
// destroyed after its source has gone.
type ProjectInfo struct {
	// Name is the Pulumi project name (`name:` in Pulumi.yaml).
	Name string `json:"name"`

	// Runtime is the Pulumi runtime (`runtime:` in Pulumi.yaml).
	Runtime string `json:"runtime"`
}

// UpdateRecord is one finished operation of a Stack, as kept in its
// status.history.
type UpdateRecord struct {
	// Name is the name of the Update object that ran the operation.
	Name string `json:"name"`
	// Type is the operation: preview, up, refresh or destroy.
	Type autov1alpha1.UpdateType `json:"type"`
	// State is succeeded or failed.
	State StackUpdateStateMessage `json:"state"`
	// Reason is the machine-readable reason of a failure (UpdateFailed,
	// UpdateConflict, Interrupted, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Generation is the Stack generation the operation ran for.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// ReconcileRequest is the reconcile request the operation ran for.
	// +optional
	ReconcileRequest string `json:"reconcileRequest,omitempty"`
	// Commit is the source revision the operation ran on.
	// +optional
	Commit string `json:"commit,omitempty"`
	// Trigger says why the operation ran (NoLastUpdate, GenerationChanged,
	// ReconcileRequested, NewRevision, DriftDetected, RetryAfterFailure,
	// Resync, Finalize).
	// +optional
	Trigger string `json:"trigger,omitempty"`
	// StartTime is when the operation started.
	// +optional
	StartTime metav1.Time `json:"startTime,omitempty"`
	// EndTime is when it finished.
	// +optional
	EndTime metav1.Time `json:"endTime,omitempty"`
	// Changes counts the resources per operation kind (create, update,
	// delete, replace, same, ...); for a preview, the changes it would make.
	// +optional
	Changes map[string]int64 `json:"changes,omitempty"`
	// Message is the operation's result message.
	// +optional
	Message string `json:"message,omitempty"`
	// Permalink links to the operation on the backend, when it has one.
	// +optional
	Permalink Permalink `json:"permalink,omitempty"`
}

// DriftCheck is the result of the last drift check of a Stack.
type DriftCheck struct {
	// Time is when the check finished.
	Time metav1.Time `json:"time"`
	// Name is the name of the Update that ran the check.
	Name string `json:"name"`
	// Drifted is true when the resources no longer match the deployment.
	Drifted bool `json:"drifted"`
	// Changes counts, per operation kind, what an update would do to undo
	// the drift.
	// +optional
	Changes map[string]int64 `json:"changes,omitempty"`
	// Failed is true when the check itself could not run; Message says why.
	// +optional
	Failed bool `json:"failed,omitempty"`
	// Message describes the result.
	// +optional
	Message string `json:"message,omitempty"`
}

// How a governed Stack's spec came to be approved (SpecApproval.By).
const (
	// ApprovedUngoverned: no stage governed the Stack when the operator
	// saw this spec; any spec of an ungoverned Stack is its own.
	ApprovedUngoverned = "Ungoverned"
	// ApprovedCreated: the spec the Stack was created with, or bound to
	// its stage with (generation 1): either write needed the verb
	// "govern" on the stage.
	ApprovedCreated = "Created"
	// ApprovedDeployed: the spec the Stack had already deployed when the
	// operator first recorded an approval (an upgrade from a version
	// that kept none).
	ApprovedDeployed = "Deployed"
	// ApprovedPromotion: the promotion that pinned the Stack previewed
	// exactly these inputs (spec, Secrets, ConfigMaps), and its gates
	// passed.
	ApprovedPromotion = "Promotion"
)

// SpecApproval records the spec, apart from spec.commit, that the operator
// may deploy for a Stack: only the operator writes it (Stack status is a
// record, config/policy). While a governed Stack's spec differs from it,
// the change is held (status.heldSpec) and nothing runs with it.
type SpecApproval struct {
	// Digest is the sha256 of the spec apart from spec.commit, as the
	// operator computes it (also the edited-spec annotation's).
	Digest string `json:"digest"`
	// Generation is the Stack's metadata.generation when it was approved.
	Generation int64 `json:"generation"`
	// By says what approved it: Ungoverned, Created, Deployed or
	// Promotion.
	By string `json:"by"`
	// Promotion is the promotion that previewed and approved it, when By
	// is Promotion.
	// +optional
	Promotion string `json:"promotion,omitempty"`
	// Snapshot is the approved spec, apart from spec.commit, kept for a
	// Stack that a stage governs so that a held change can be shown
	// against it: every secret value given inline is replaced by a short
	// digest ("[secret 1a2b3c4d]").
	// +optional
	Snapshot *apiextensionsv1.JSON `json:"snapshot,omitempty"`
}

// How a field of a held spec differs from the approved one
// (SpecChange.Op).
const (
	SpecChangeAdded   = "Added"
	SpecChangeRemoved = "Removed"
	SpecChangeChanged = "Changed"
)

// SpecChange is one field of a held spec that differs from the approved
// spec. Secret values given inline show as a digest, never as themselves.
type SpecChange struct {
	// Path is the field, e.g. config["aws:region"] or
	// workspaceTemplate.spec.image.
	Path string `json:"path"`
	// Op is Added, Removed or Changed.
	Op string `json:"op"`
	// Old is the approved value, as JSON (cut at 200 characters).
	// +optional
	Old string `json:"old,omitempty"`
	// New is the held value, as JSON (cut at 200 characters).
	// +optional
	New string `json:"new,omitempty"`
}

// HeldSpec describes a change to a governed Stack's spec that waits for a
// promotion: the Stack keeps running what it last deployed, with its
// approved spec, and runs nothing with this one.
type HeldSpec struct {
	// Digest is the sha256 of the held spec apart from spec.commit.
	Digest string `json:"digest"`
	// Generation is the metadata.generation of the held spec.
	Generation int64 `json:"generation"`
	// EditedBy is who wrote it, as the API server authenticated them
	// (recorded by the operator's admission webhook); empty when nobody
	// is known to have, and then no approval is counted as independent of
	// the editor.
	// +optional
	EditedBy string `json:"editedBy,omitempty"`
	// Since is when the operator first saw it held.
	Since metav1.Time `json:"since"`
	// Changes are the fields that differ from the approved spec
	// (status.approvedSpec.snapshot), sorted by path, at most 50; empty
	// when no snapshot of the approved spec is kept.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Changes []SpecChange `json:"changes,omitempty"`
	// ChangesTruncated says changes lists only the first 50.
	// +optional
	ChangesTruncated bool `json:"changesTruncated,omitempty"`
}
