package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// sha1, sha2 are commits no Stack in this file ever deploys.
const (
	sha1 = "1111111111111111111111111111111111111111"
	sha2 = "2222222222222222222222222222222222222222"
)

// TestBadInput feeds each mistake of issue 9's list, and a few more, to
// the API: a static one is refused at admission; otherwise the Promotion
// ends Aborted or Failed, or the Stage stalls, with a message naming the
// field, and no Stack is changed.
func TestBadInput(t *testing.T) {
	idle := func(ns, name string) *pulumiv1.Stack {
		// A Stack pinned to a commit of a repository nobody serves runs
		// nothing (a governed Stack must pin a commit).
		return &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: shared.StackSpec{
			Stack: "dev", GitSource: &shared.GitSource{ProjectRepo: "http://127.0.0.1:9/web.git", Commit: "00000000000000000000000000000000000000aa"},
		}}
	}
	withSource := func(s *pulumiv1.Stack, src *shared.GitSource, program *shared.ProgramReference) *pulumiv1.Stack {
		s.Spec.GitSource, s.Spec.ProgramRef = src, program
		return s
	}
	otherPipeline := func(ns string) *promotionv1alpha1.Release {
		r := release(ns, "o1", sha2, time.Now())
		r.Spec.Pipeline, r.Labels[promotionv1alpha1.PipelineLabel] = "other", "other"
		return r
	}
	tests := []struct {
		name string
		// objects are created in order in a new namespace, with the
		// Pipeline web (unless noPipeline) and its release r1.
		objects    func(ns string) []client.Object
		noPipeline bool
		// refused is what admission answers, when it refuses.
		refused string
		// promotion, when set, must end in phase with a message holding
		// message; otherwise the Stage named stage must stall with it.
		promotion, stage string
		phase            promotionv1alpha1.PromotionPhase
		message          string
	}{{
		name: "a release that does not exist",
		objects: func(ns string) []client.Object {
			return []client.Object{stage(ns, "prod", []string{"web"}, nil), askFor(ns, "p", "prod", "nope", false)}
		},
		promotion: "p", phase: promotionv1alpha1.PromotionAborted, message: `spec.release: Release "nope" not found`,
	}, {
		name: "a release of another pipeline",
		objects: func(ns string) []client.Object {
			return []client.Object{otherPipeline(ns), stage(ns, "prod", []string{"web"}, nil), askFor(ns, "p", "prod", "o1", false)}
		},
		promotion: "p", phase: promotionv1alpha1.PromotionAborted, message: `spec.release: Release "o1" belongs to pipeline "other"`,
	}, {
		name:      "a stage that does not exist",
		objects:   func(ns string) []client.Object { return []client.Object{askFor(ns, "p", "nope", "r1", false)} },
		promotion: "p", phase: promotionv1alpha1.PromotionAborted, message: `spec.stage: Stage "nope" not found`,
	}, {
		name: "promotion into a frozen stage",
		objects: func(ns string) []client.Object {
			return []client.Object{
				stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
					s.Freeze = &promotionv1alpha1.Freeze{Reason: "quarter-end close"}
				}),
				askFor(ns, "p", "prod", "r1", false),
			}
		},
		promotion: "p", phase: promotionv1alpha1.PromotionAborted, message: `spec.stage: Stage "prod" is frozen: quarter-end close`,
	}, {
		name: "a rollback to a release never verified in the stage",
		objects: func(ns string) []client.Object {
			return []client.Object{stage(ns, "prod", []string{"web"}, nil), askFor(ns, "p", "prod", "r1", true)}
		},
		promotion: "p", phase: promotionv1alpha1.PromotionAborted, message: `spec.release: Release "r1" was never verified in stage "prod"`,
	}, {
		name: "a Stack that tracks a branch",
		objects: func(ns string) []client.Object {
			return []client.Object{
				withSource(idle(ns, "web"), &shared.GitSource{ProjectRepo: "http://127.0.0.1:9/web.git", Branch: "main"}, nil),
				stage(ns, "prod", []string{"web"}, nil), askFor(ns, "p", "prod", "r1", false),
			}
		},
		// A governed Stack must pin a commit: refused at admission.
		refused: `spec: Stack web names stage prod in promotion.stackyard.dev/authorized-stage, so it must pin spec.commit of spec.projectRepo`,
	}, {
		name: "a Program-backed Stack",
		objects: func(ns string) []client.Object {
			return []client.Object{
				withSource(idle(ns, "web"), nil, &shared.ProgramReference{Name: "site"}),
				stage(ns, "prod", []string{"web"}, nil), askFor(ns, "p", "prod", "r1", false),
			}
		},
		refused: `spec: Stack web names stage prod in promotion.stackyard.dev/authorized-stage, so it must pin spec.commit of spec.projectRepo`,
	}, {
		name:       "a stage of a pipeline that does not exist",
		noPipeline: true,
		objects:    func(ns string) []client.Object { return []client.Object{stage(ns, "prod", []string{"web"}, nil)} },
		stage:      "prod", message: `spec.pipeline: Pipeline "web" not found`,
	}, {
		name:    "a stage bound to a missing Stack",
		objects: func(ns string) []client.Object { return []client.Object{stage(ns, "prod", []string{"ghost"}, nil)} },
		stage:   "prod", message: `spec.stacks[0]: Stack "ghost" not found`,
	}, {
		name: "a promotion into a stage bound to a missing Stack",
		objects: func(ns string) []client.Object {
			return []client.Object{stage(ns, "prod", []string{"ghost"}, nil), askFor(ns, "p", "prod", "r1", false)}
		},
		promotion: "p", phase: promotionv1alpha1.PromotionFailed, message: `Stack "ghost" not found`,
	}, {
		name: "a Stack bound twice",
		objects: func(ns string) []client.Object {
			return []client.Object{idle(ns, "web"), stage(ns, "first", []string{"web"}, nil), stage(ns, "second", []string{"api", "web"}, nil), idle(ns, "api")}
		},
		stage: "second", message: `spec.stacks[1]: Stack "web" may be deployed only by Stage "first" (promotion.stackyard.dev/authorized-stage); remove it from one of the stages`,
	}, {
		name: "a cycle in the stage graph",
		objects: func(ns string) []client.Object {
			upstream := func(names ...string) func(*promotionv1alpha1.StageSpec) {
				return func(s *promotionv1alpha1.StageSpec) { s.Sources = promotionv1alpha1.ReleaseSources{Stages: names} }
			}
			return []client.Object{
				idle(ns, "a"), idle(ns, "b"), idle(ns, "c"),
				stage(ns, "a", []string{"a"}, upstream("c")), stage(ns, "b", []string{"b"}, upstream("a")), stage(ns, "c", []string{"c"}, upstream("b")),
			}
		},
		stage: "a", message: "spec.sources.stages: the stage graph has a cycle: a → c → b → a",
	}, {
		// A stage both waiting (its Stack is not there yet) and wrong (a
		// cycle) says what only a person can fix.
		name: "a cycle in the stage graph, and a missing Stack",
		objects: func(ns string) []client.Object {
			upstream := func(names ...string) func(*promotionv1alpha1.StageSpec) {
				return func(s *promotionv1alpha1.StageSpec) { s.Sources = promotionv1alpha1.ReleaseSources{Stages: names} }
			}
			return []client.Object{stage(ns, "a", []string{"ghost"}, upstream("b")), stage(ns, "b", []string{"b"}, upstream("a"))}
		},
		stage: "a", message: "spec.sources.stages: the stage graph has a cycle: a → b → a",
	}, {
		name: "an upstream stage of another pipeline",
		objects: func(ns string) []client.Object {
			other := stage(ns, "elsewhere", []string{"api"}, nil)
			other.Spec.Pipeline = "other"
			return []client.Object{idle(ns, "web"), idle(ns, "api"), other, stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
				s.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"elsewhere"}}
			})}
		},
		stage: "prod", message: `spec.sources.stages[0]: Stage "elsewhere" belongs to pipeline "other", not "web"`,
	}, {
		name: "an upstream stage that does not exist",
		objects: func(ns string) []client.Object {
			return []client.Object{idle(ns, "web"), stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
				s.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"nope"}}
			})}
		},
		stage: "prod", message: `spec.sources.stages[0]: Stage "nope" not found`,
	}, {
		name: "a promotion window the operator cannot read",
		objects: func(ns string) []client.Object {
			return []client.Object{idle(ns, "web"), stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
				s.PromotionWindows = []promotionv1alpha1.PromotionWindow{{Kind: promotionv1alpha1.Allow, RRule: "FREQ=MONTHLY", DTStart: metav1.Now(), DTEnd: metav1.NewTime(time.Now().Add(time.Hour))}}
			})}
		},
		stage: "prod", message: "spec.promotionWindows[0].rrule: rrule: FREQ=MONTHLY is not supported",
	}, {
		name: "MatchUpstream with two upstream stages",
		objects: func(ns string) []client.Object {
			return []client.Object{stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
				s.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}}
				s.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true, SelectionPolicy: promotionv1alpha1.MatchUpstream}
			})}
		},
		refused: "MatchUpstream needs exactly one stage in spec.sources.stages",
	}, {
		name: "a window that ends before it starts",
		objects: func(ns string) []client.Object {
			return []client.Object{stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
				s.PromotionWindows = []promotionv1alpha1.PromotionWindow{{Kind: promotionv1alpha1.Deny, DTStart: metav1.Now(), DTEnd: metav1.NewTime(time.Now().Add(-time.Hour))}}
			})}
		},
		refused: "dtend must be after dtstart",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			if !tt.noPipeline {
				create(t, pipeline(ns, "http://127.0.0.1:9/web.git"))
			}
			create(t, release(ns, "r1", sha1, time.Now()))
			objs := tt.objects(ns)
			consent(objs)
			for _, obj := range objs {
				err := env.Client.Create(ctx, obj)
				if tt.refused != "" {
					g.Expect(err).To(MatchError(ContainSubstring(tt.refused)))
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tt.promotion != "" {
				p := waitFinished(t, ns, tt.promotion, time.Minute)
				g.Expect(p.Status.Phase).To(Equal(tt.phase), p.Status.Message)
				g.Expect(p.Status.Message).To(ContainSubstring(tt.message))
				g.Expect(p.Status.EndTime).NotTo(BeNil())
				reason := "PromotionAborted"
				if tt.phase == promotionv1alpha1.PromotionFailed {
					reason = "PromotionFailed"
				}
				g.Eventually(func(g Gomega) []string { return eventReasons(g, ns, "Promotion", tt.promotion) }).Should(ContainElement(reason))
				assertNoStackPinned(g, ns)
				return
			}
			st := waitFor(t, &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tt.stage}}, time.Minute,
				func(g Gomega, st *promotionv1alpha1.Stage) {
					g.Expect(sreconcile.IsStalled(st.Status.Conditions)).To(BeTrue(), "not stalled")
				})
			stalled := apimeta.FindStatusCondition(st.Status.Conditions, sreconcile.StalledCondition)
			g.Expect(stalled.Message).To(ContainSubstring(tt.message))
			g.Expect(stalled.Reason).To(BeElementOf(sreconcile.StalledSpecInvalidReason, pulumiv1.ReferenceNotFoundReason))
			g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation))
			g.Expect(st.Status.WaitingFor).To(ContainSubstring(tt.message))
			g.Expect(promotionsOf(g, ns, tt.stage)).To(BeEmpty())
		})
	}
}

// assertNoStackPinned checks that no Stack of ns has a commit the tests'
// releases name.
func assertNoStackPinned(g Gomega, ns string) {
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(context.Background(), &stacks, client.InNamespace(ns))).To(Succeed())
	for _, s := range stacks.Items {
		if s.Spec.GitSource != nil {
			g.Expect(s.Spec.Commit).NotTo(Equal(sha1), "Stack %s was pinned", s.Name)
		}
	}
}
