package notify

import (
	"fmt"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	"strings"
	"time"
)

// Event is one fact an Alert reports. A webhook Provider receives it as
// JSON; the other formats are made from it. It holds no secret: names,
// phases, messages the operator already shows in status, commit SHAs and
// links.
type Event struct {
	// Type is the Alert event type, e.g. "PromotionSucceeded".
	Type string `json:"event"`
	// Key identifies the fact, the same at every reconcile and on every
	// replica, e.g. "promotion/<uid>/Succeeded"; receivers may deduplicate
	// on it (delivery is at least once).
	Key string `json:"key"`
	// Time is when the fact became true.
	Time time.Time `json:"time"`
	// Namespace is the namespace of the object.
	Namespace string `json:"namespace"`
	// Kind is the object's kind: Promotion, Release or Stack.
	Kind string `json:"kind"`
	// Name is the object's name.
	Name string `json:"name"`
	// Stage is the stage concerned, if any.
	Stage string `json:"stage,omitempty"`
	// Pipeline is the pipeline concerned, if any.
	Pipeline string `json:"pipeline,omitempty"`
	// Release is the release concerned, if any.
	Release string `json:"release,omitempty"`
	// Commit is the commit SHA concerned, if any.
	Commit string `json:"commit,omitempty"`
	// Phase is the object's phase or state (Pending, Succeeded, Stalled…).
	Phase string `json:"phase,omitempty"`
	// Message says more, in the operator's words.
	Message string `json:"message,omitempty"`
	// Approvers are who may approve a promotion awaiting approval, as the
	// stage's approval policy names them ("user alice", "group qa"); empty
	// means anyone allowed the verb "approve" on the stage.
	Approvers []string `json:"approvers,omitempty"`
	// URL links to the object on the dashboard, when the operator knows the
	// dashboard's external address.
	URL string `json:"url,omitempty"`

	// RepoURL is the repository of the release (the Pipeline's), which
	// commit statuses are set on. Not sent: it may hold credentials.
	RepoURL string `json:"-"`
}

// Title is a one-line summary of the event.
func (e *Event) Title() string {
	switch e.Type {
	case string(notificationv1alpha1.EventReleaseDiscovered):
		return fmt.Sprintf("Release %s discovered by pipeline %s", e.Name, e.Pipeline)
	case string(notificationv1alpha1.EventPromotionAwaitingApproval):
		return fmt.Sprintf("Promotion of %s into %s awaits approval", e.Release, e.Stage)
	case string(notificationv1alpha1.EventPromotionSucceeded):
		return fmt.Sprintf("Promotion of %s into %s succeeded", e.Release, e.Stage)
	case string(notificationv1alpha1.EventPromotionFailed):
		return fmt.Sprintf("Promotion of %s into %s failed", e.Release, e.Stage)
	case string(notificationv1alpha1.EventVerificationFailed):
		return fmt.Sprintf("Verification of %s in %s failed", e.Release, e.Stage)
	case string(notificationv1alpha1.EventRolledBack):
		return fmt.Sprintf("Stage %s rolled back to %s", e.Stage, e.Release)
	case string(notificationv1alpha1.EventRolloutHalted):
		return fmt.Sprintf("Rollout of %s into %s halted", e.Release, e.Stage)
	case string(notificationv1alpha1.EventStackStalled):
		return fmt.Sprintf("Stack %s is stalled", e.Name)
	case string(notificationv1alpha1.EventDriftDetected):
		return fmt.Sprintf("Stack %s drifted", e.Name)
	default:
		return fmt.Sprintf("%s: %s %s", e.Type, e.Kind, e.Name)
	}
}

// Lines are the details of the event, one per line, without the title.
func (e *Event) Lines() []string {
	var lines []string
	lines = append(lines, fmt.Sprintf("%s %s/%s", e.Kind, e.Namespace, e.Name))
	if e.Commit != "" {
		lines = append(lines, "commit "+e.Commit)
	}
	if e.Message != "" {
		lines = append(lines, e.Message)
	}
	if len(e.Approvers) > 0 {
		lines = append(lines, "may approve: "+strings.Join(e.Approvers, ", "))
	}
	if e.URL != "" {
		lines = append(lines, e.URL)
	}
	return lines
}
