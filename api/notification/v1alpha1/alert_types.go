package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// EventType is a kind of fact an Alert reports.
//
// +kubebuilder:validation:Enum=ReleaseDiscovered;PromotionAwaitingApproval;PromotionSucceeded;PromotionFailed;VerificationFailed;RolledBack;RolloutHalted;StackStalled;DriftDetected
type EventType string

const (
	// EventReleaseDiscovered: a Pipeline discovered a Release.
	EventReleaseDiscovered EventType = promotionv1alpha1.EventReleaseDiscovered
	// EventPromotionAwaitingApproval: a Promotion waits for approvals
	// (phase Pending, message "waiting for approval…"). The notification
	// names who may approve (the stage's spec.approval.from) and links to
	// the dashboard when the operator knows its external URL.
	EventPromotionAwaitingApproval EventType = promotionv1alpha1.EventPromotionAwaitingApproval
	// EventPromotionSucceeded: a Promotion succeeded (rollbacks included).
	EventPromotionSucceeded EventType = promotionv1alpha1.EventPromotionSucceeded
	// EventPromotionFailed: a Promotion failed.
	EventPromotionFailed EventType = promotionv1alpha1.EventPromotionFailed
	// EventVerificationFailed: a Promotion's verification failed
	// (status.verification.phase Failed).
	EventVerificationFailed EventType = promotionv1alpha1.EventVerificationFailed
	// EventRolledBack: a rollback Promotion (spec.rollback) succeeded.
	EventRolledBack EventType = promotionv1alpha1.EventRolledBack
	// EventRolloutHalted: a promotion's rollout halted: its failure
	// budget was spent, or a person halted it (an Intervention).
	EventRolloutHalted EventType = promotionv1alpha1.EventRolloutHalted
	// EventStackStalled: a Stack became Stalled (kstatus): only a human
	// can make it progress.
	EventStackStalled EventType = promotionv1alpha1.EventStackStalled
	// EventDriftDetected: a Stack's drift check found drift
	// (status.lastDriftCheck.drifted).
	EventDriftDetected EventType = promotionv1alpha1.EventDriftDetected
)

// MaxDeliveredKeys is how many delivered events an Alert remembers in
// status.delivered.
const MaxDeliveredKeys = 256

// LocalReference names an object of the same namespace.
type LocalReference struct {
	// Name is the object's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// AlertSpec says which events of the namespace go to which Provider.
type AlertSpec struct {
	// ProviderRef names the Provider, in the same namespace, the events
	// are sent to.
	ProviderRef LocalReference `json:"providerRef"`

	// Events are the kinds of events sent. The commit-status providers
	// (gitea, github, gitlab) take the promotion events only
	// (PromotionAwaitingApproval as pending, PromotionSucceeded and
	// RolledBack as success, PromotionFailed and VerificationFailed as
	// failure); the others are left out for them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=set
	Events []EventType `json:"events"`

	// Stages, when set, limits the events about a stage (promotions, and
	// Stacks a stage binds) to these stages; a Stack no stage binds is
	// then left out. Releases belong to no stage and are not filtered by
	// it.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	Stages []string `json:"stages,omitempty"`

	// Pipelines, when set, limits the events to these Pipelines' releases,
	// promotions and the Stacks of their stages; a Stack no stage binds is
	// then left out.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	Pipelines []string `json:"pipelines,omitempty"`

	// Suspend stops sending while set. Events that happen meanwhile are
	// sent once it is cleared, if they still hold and are still among the
	// last remembered (a suspended Alert does not record them).
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// DeliveredEvent is one event an Alert sent.
type DeliveredEvent struct {
	// Key identifies the event, e.g. "promotion/<uid>/Succeeded" or
	// "stack/<uid>/stalled/<generation>".
	Key string `json:"key"`
	// Time is when the event happened.
	Time metav1.Time `json:"time"`
}

// AlertStatus says what the Alert delivered and whether delivery works.
type AlertStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Reconciling and Stalled (kstatus). Ready is
	// False while a delivery fails and is retried.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastDelivered is when the Alert last delivered an event.
	// +optional
	LastDelivered *metav1.Time `json:"lastDelivered,omitempty"`

	// DeliveredCount counts the events delivered.
	// +optional
	DeliveredCount int64 `json:"deliveredCount,omitempty"`

	// FailedCount counts the failed delivery attempts.
	// +optional
	FailedCount int64 `json:"failedCount,omitempty"`

	// LastFailure says why the last delivery attempt failed (never a
	// secret, nor an address read from the Secret); cleared by the next
	// delivery that succeeds.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastFailure string `json:"lastFailure,omitempty"`

	// Delivered are the last events delivered (at most 256), oldest
	// first: an event is sent once, even across restarts of the operator.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Delivered []DeliveredEvent `json:"delivered,omitempty"`

	// Watermark is the time of the newest event forgotten from Delivered:
	// events that happened up to then are not sent again.
	// +optional
	Watermark *metav1.Time `json:"watermark,omitempty"`
}

// Alert sends the events of its namespace (promotions, releases, Stacks)
// to a Provider. Delivery is at least once: each event is sent until the
// Provider accepts it and is then remembered in status; events older than
// the Alert are not sent.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=syalert,categories=stackyard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Delivered",type=integer,JSONPath=`.status.deliveredCount`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastDelivered`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Alert struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what to send where.
	Spec AlertSpec `json:"spec"`
	// Status says what was delivered.
	Status AlertStatus `json:"status,omitempty"`
}

// AlertList is a list of Alerts.
//
// +kubebuilder:object:root=true
type AlertList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Alerts.
	Items []Alert `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Alert{}, &AlertList{})
}
