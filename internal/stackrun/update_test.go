package stackrun

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestBuildUpdate checks what each kind of update asks the agent for:
// refresh (asked for, or undoing drift), expectNoRefreshChanges, targets,
// the TTL, and what the Stack's updateTemplate can and cannot override.
func TestBuildUpdate(t *testing.T) {
	drifted := func(s *pulumiv1.Stack) {
		s.Spec.DriftDetection = &shared.DriftDetection{Remediate: true}
		s.Status.Conditions = []metav1.Condition{{Type: pulumiv1.DriftDetectedCondition, Status: metav1.ConditionTrue, Reason: "Drifted"}}
	}
	failedOnce := func(s *pulumiv1.Stack) {
		s.Status.LastUpdate = &shared.StackUpdateState{Name: "web-1", State: shared.FailedStackStateMessage, Failures: 1,
			LastResyncTime: metav1.NewTime(time.Unix(1000, 0))}
	}
	tests := []struct {
		name    string
		mutate  func(*pulumiv1.Stack)
		typ     autov1alpha1.UpdateType
		trigger string
		// remediate: the Update undoes drift a check found.
		remediate bool
		check     func(g Gomega, u *autov1alpha1.Update)
	}{{
		name: "plain up: no refresh, the default TTL",
		typ:  autov1alpha1.UpType, trigger: "NoLastUpdate",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Refresh).To(HaveValue(BeFalse()))
			g.Expect(u.Spec.ExpectNoRefreshChanges).To(BeNil())
			g.Expect(u.Spec.TtlAfterCompleted.Duration).To(Equal(DefaultUpdateTTL))
			g.Expect(u.Annotations).To(HaveKeyWithValue(TriggerAnnotation, "NoLastUpdate"))
			g.Expect(u.Labels).To(HaveKeyWithValue(StackNameLabel, "web"))
		},
	}, {
		name: "refresh with expectNoRefreshChanges",
		mutate: func(s *pulumiv1.Stack) {
			s.Spec.Refresh, s.Spec.ExpectNoRefreshChanges = true, true
		},
		typ: autov1alpha1.UpType, trigger: "GenerationChanged",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Refresh).To(HaveValue(BeTrue()))
			g.Expect(u.Spec.ExpectNoRefreshChanges).To(HaveValue(BeTrue()))
		},
	}, {
		name:   "a remediation refreshes and expects refresh changes",
		mutate: func(s *pulumiv1.Stack) { s.Spec.Refresh, s.Spec.ExpectNoRefreshChanges = true, true; drifted(s) },
		typ:    autov1alpha1.UpType, trigger: "DriftDetected", remediate: true,
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Refresh).To(HaveValue(BeTrue()))
			g.Expect(u.Spec.ExpectNoRefreshChanges).To(BeNil())
		},
	}, {
		name:   "the retry of a failed remediation still refreshes",
		mutate: func(s *pulumiv1.Stack) { drifted(s); failedOnce(s) },
		typ:    autov1alpha1.UpType, trigger: "RetryAfterFailure",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Refresh).To(HaveValue(BeTrue()))
		},
	}, {
		name: "drift seen without remediation does not make retries refresh",
		mutate: func(s *pulumiv1.Stack) {
			drifted(s)
			s.Spec.DriftDetection.Remediate = false
			failedOnce(s)
		},
		typ: autov1alpha1.UpType, trigger: "RetryAfterFailure",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Refresh).To(HaveValue(BeFalse()))
		},
	}, {
		name:   "targets are passed on",
		mutate: func(s *pulumiv1.Stack) { s.Spec.Targets, s.Spec.TargetDependents = []string{"urn:a"}, true },
		typ:    autov1alpha1.UpType, trigger: "GenerationChanged",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Target).To(Equal([]string{"urn:a"}))
			g.Expect(u.Spec.TargetDependents).To(HaveValue(BeTrue()))
		},
	}, {
		name: "destroy neither refreshes nor targets",
		mutate: func(s *pulumiv1.Stack) {
			s.Spec.Refresh, s.Spec.Targets = true, []string{"urn:a"}
		},
		typ: autov1alpha1.DestroyType, trigger: "GenerationChanged",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.Refresh).To(BeNil())
			g.Expect(u.Spec.Target).To(BeNil())
		},
	}, {
		name: "updateTemplate: TTL, labels and annotations, but not the stack label or trigger",
		mutate: func(s *pulumiv1.Stack) {
			s.Spec.UpdateTemplate = &autov1alpha1.UpdateTemplate{
				Metadata: &autov1alpha1.EmbeddedObjectMeta{
					Labels:      map[string]string{"team": "a", StackNameLabel: "other"},
					Annotations: map[string]string{"note": "x", TriggerAnnotation: "forged"},
				},
				Spec: &autov1alpha1.UpdateSpec{TtlAfterCompleted: &metav1.Duration{Duration: time.Minute}},
			}
		},
		typ: autov1alpha1.UpType, trigger: "GenerationChanged",
		check: func(g Gomega, u *autov1alpha1.Update) {
			g.Expect(u.Spec.TtlAfterCompleted.Duration).To(Equal(time.Minute))
			g.Expect(u.Labels).To(Equal(map[string]string{StackNameLabel: "web", "team": "a"}))
			g.Expect(u.Annotations).To(Equal(map[string]string{TriggerAnnotation: "GenerationChanged", "note": "x"}))
			g.Expect(u.Spec.StackName).To(Equal("org/web/dev"))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := testStack(nil)
			if tt.mutate != nil {
				tt.mutate(s)
			}
			u := BuildUpdate(s, UpdateFor{Revision: "abc", Type: tt.typ, Trigger: tt.trigger, Remediate: tt.remediate})
			g.Expect(u.Spec.Type).To(Equal(tt.typ))
			g.Expect(u.Spec.WorkspaceName).To(Equal(WorkspaceName(s)))
			tt.check(g, u)
			g.Expect(u.Name).To(BeEmpty(), "the API server names it")
			g.Expect(u.GenerateName).To(Equal("web-"))
		})
	}
}
