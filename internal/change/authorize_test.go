package change

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

const ns = "prod-ns"

var authorizeNow = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func controllerRef(gvk schema.GroupVersionKind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: uid,
		Controller: new(true), BlockOwnerDeletion: new(true)}}
}

var (
	stackKind     = pulumiv1.GroupVersion.WithKind("Stack")
	promotionKind = promotionv1alpha1.GroupVersion.WithKind("Promotion")
	pipelineKind  = promotionv1alpha1.GroupVersion.WithKind("Pipeline")
	// A kind of another group, named as the prod Stack is, with its UID:
	// the planted Update's claim.
	foreignKind = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Stack"}
)

// world is the namespace Authorize reads: a governed Stack "prod" (stage
// prod) running Update "prod-up", pinned by the running promotion
// "promote" with its plan; an ungoverned Stack "dev"; a preview-only
// stage's promotion "peek" previewing prod; a Pipeline "pipe" previewing
// pull request #7 against prod for stage prod.
type world struct {
	prod, dev     *pulumiv1.Stack
	promote, peek *promotionv1alpha1.Promotion
	pipe          *promotionv1alpha1.Pipeline
	stage         *promotionv1alpha1.Stage
	plan, cm      *corev1.Secret
	token         *corev1.Secret
	// promoteProd is promote's record of Stack prod.
	promoteProd *promotionv1alpha1.StackPromotion
}

func newWorld(t *testing.T) (*world, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, pulumiv1.AddToScheme, promotionv1alpha1.AddToScheme, autov1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	commit := strings.Repeat("c", 40)
	w := &world{}
	w.prod = &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod", UID: "uid-prod", Annotations: map[string]string{
			promotionv1alpha1.AuthorizedStageAnnotation: "prod",
			shared.ReconcileRequestAnnotation:           PinRequest("promote", "uid-promote"),
		}},
		Spec: shared.StackSpec{Stack: "prod", GitSource: &shared.GitSource{ProjectRepo: "https://git.example/x.git", Commit: commit},
			AccessTokenSecret: "token"},
		Status: pulumiv1.StackStatus{CurrentUpdate: &shared.CurrentStackUpdate{Name: "prod-up", UID: "uid-prod-up"},
			Workspace: &shared.ObjectRecord{Name: "prod", UID: "uid-ws-prod"}},
	}
	// The Stack controller approved its spec (change.ApproveSpec).
	approved, err := SpecDigest(w.prod)
	if err != nil {
		t.Fatal(err)
	}
	w.prod.Status.ApprovedSpec = &shared.SpecApproval{Digest: approved, Generation: 1, By: shared.ApprovedCreated}
	w.dev = &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev", UID: "uid-dev"},
		Spec:       shared.StackSpec{Stack: "dev"},
		Status: pulumiv1.StackStatus{CurrentUpdate: &shared.CurrentStackUpdate{Name: "dev-up", UID: "uid-dev-up"},
			Workspace: &shared.ObjectRecord{Name: "dev", UID: "uid-ws-dev"}},
	}
	w.plan = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promote-prod.plan"},
		Data: map[string][]byte{autov1alpha1.PlanKey: []byte("the plan")}}
	w.cm = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}}
	w.token = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, Data: map[string][]byte{"accessToken": []byte("t")}}
	w.promote = &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promote", UID: "uid-promote"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r1"},
		Status: promotionv1alpha1.PromotionStatus{
			Phase:  promotionv1alpha1.PromotionRunning,
			Stacks: []promotionv1alpha1.PromotedStack{{Name: "prod", Commit: commit}},
		},
	}
	w.promoteProd = recordOf(w.promote, promotionv1alpha1.StackPreview{Name: "prod", Update: PreviewName("promote", "prod", 1), Round: 1, Plan: w.plan.Name,
		Recorded: previewRecord(PreviewName("promote", "prod", 1))})
	w.peek = &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peek", UID: "uid-peek"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "peek", Release: "r2"},
		Status: promotionv1alpha1.PromotionStatus{
			Phase: promotionv1alpha1.PromotionPending,
		},
	}
	peekProd := recordOf(w.peek, promotionv1alpha1.StackPreview{Name: "prod", Update: PreviewName("peek", "prod", 1), Round: 1, Recorded: previewRecord(PreviewName("peek", "prod", 1))})
	peekDev := recordOf(w.peek, promotionv1alpha1.StackPreview{Name: "dev", Update: PreviewName("peek", "dev", 1), Round: 1, Recorded: previewRecord(PreviewName("peek", "dev", 1))})
	w.stage = &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec:       promotionv1alpha1.StageSpec{Pipeline: "pipe", Stacks: []promotionv1alpha1.StackBinding{{Name: "prod"}}},
	}
	w.pipe = &promotionv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pipe", UID: "uid-pipe"},
		Spec:       promotionv1alpha1.PipelineSpec{PullRequests: &promotionv1alpha1.PullRequestPreviews{Stages: []string{"prod"}}},
		Status: promotionv1alpha1.PipelineStatus{PullRequests: &promotionv1alpha1.PullRequestPreviewsStatus{PullRequests: []promotionv1alpha1.PullRequestStatus{{
			Number: 7, Head: strings.Repeat("e", 40),
			Stacks: []promotionv1alpha1.PullRequestStackPreview{{Stage: "prod", Stack: "prod", Update: PullRequestPreviewName("pipe", 7, "prod", strings.Repeat("e", 40)),
				Recorded: previewRecord(PullRequestPreviewName("pipe", 7, "prod", strings.Repeat("e", 40)))}},
		}}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w.prod, w.dev, w.plan, w.cm, w.token, w.promote, w.peek, w.stage, w.pipe, w.promoteProd, peekProd, peekDev).
		WithStatusSubresource(w.prod, w.dev, w.promote, w.peek, w.pipe).Build()
	// The promotion recorded the digest of what it previewed.
	inputs, err := StackDigest(context.Background(), c, w.prod)
	if err != nil {
		t.Fatal(err)
	}
	w.promoteProd.Preview.Inputs, w.promoteProd.Preview.PlanDigest = inputs, PlanDigest(w.plan)
	if err := c.Update(context.Background(), w.promoteProd); err != nil {
		t.Fatal(err)
	}
	return w, c
}

// planted is ws made, a while ago, by someone other than its maker: under
// its name, claiming its maker, with a UID nobody recorded.
func planted(ws *autov1alpha1.Workspace) *autov1alpha1.Workspace {
	ws.UID, ws.CreationTimestamp = "uid-planted", metav1.NewTime(authorizeNow.Add(-RecordGrace))
	return ws
}

// recordOf is the StackPromotion in which p records pv.
func recordOf(p *promotionv1alpha1.Promotion, pv promotionv1alpha1.StackPreview) *promotionv1alpha1.StackPromotion {
	rec := NewStackPromotion(p, pv.Name)
	rec.Preview = &pv
	return rec
}

// previewWorkspaceOf is the Workspace of promotion's first preview of
// stack: named and labelled as the promotion makes it.
func previewWorkspaceOf(promotion, stack string, owners []metav1.OwnerReference) *autov1alpha1.Workspace {
	ws := workspaceOf(PreviewName(promotion, stack, 1), owners)
	ws.Labels = map[string]string{promotionv1alpha1.PromotionLabel: promotion, promotionv1alpha1.StackLabel: stack}
	return ws
}

// previewRecord is what a preview's maker records of the Workspace and
// the first Update it made under name, with the UIDs workspaceOf and
// updateOf give them.
func previewRecord(name string) *promotionv1alpha1.PreviewRecord {
	return &promotionv1alpha1.PreviewRecord{Workspace: types.UID("uid-ws-" + name), Update: types.UID("uid-" + name)}
}

func workspaceOf(name string, owners []metav1.OwnerReference) *autov1alpha1.Workspace {
	return &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-ws-" + name), OwnerReferences: owners}}
}

func updateOf(name, ws string, typ autov1alpha1.UpdateType, plan string, owners []metav1.OwnerReference, age time.Duration) *autov1alpha1.Update {
	return &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), OwnerReferences: owners, CreationTimestamp: metav1.NewTime(authorizeNow.Add(-age))},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: ws, StackName: "prod", Type: typ, PlanSecret: plan},
	}
}

// TestAuthorize decides, for each way an operation can reach the agent,
// who authorized it; everything no record proves is refused, whatever the
// Update claims.
func TestAuthorize(t *testing.T) {
	ctx := context.Background()
	byProd := controllerRef(stackKind, "prod", "uid-prod")
	byDev := controllerRef(stackKind, "dev", "uid-dev")
	prodWS := workspaceOf("prod", byProd)
	head := strings.Repeat("e", 40)
	prWS := PullRequestPreviewName("pipe", 7, "prod", head)
	byPipe := controllerRef(pipelineKind, "pipe", "uid-pipe")
	byPromote := controllerRef(promotionKind, "promote", "uid-promote")
	byPeek := controllerRef(promotionKind, "peek", "uid-peek")

	for _, tt := range []struct {
		name   string
		change func(*world, client.Client) // what the attacker (or time) changed first
		upd    *autov1alpha1.Update
		ws     *autov1alpha1.Workspace
		want   Authority // "" when refused
		wait   bool
		reason string
		uid    types.UID // the Update's metadata.uid
		// checked: the verdict hands the agent the versions it found to
		// be what the promotion previewed (Verdict.Reads).
		checked bool
	}{
		{name: "a user's Update in a user's Workspace", upd: updateOf("mine", "mine", autov1alpha1.UpType, "", nil, time.Hour),
			ws: workspaceOf("mine", nil), want: AuthorityOwnWorkspace},
		{name: "a user's Update in a Workspace controlled by a foreign kind", upd: updateOf("mine", "mine", autov1alpha1.UpType, "", nil, time.Hour),
			ws: workspaceOf("mine", controllerRef(foreignKind, "prod", "uid-prod")), want: AuthorityOwnWorkspace},
		{name: "an ungoverned Stack's own, recorded", upd: updateOf("dev-up", "dev", autov1alpha1.UpType, "", byDev, 0),
			ws: workspaceOf("dev", byDev), want: AuthorityStack, uid: "uid-dev-up"},
		{name: "an ungoverned Stack's own, replaced under its name", upd: updateOf("dev-up", "dev", autov1alpha1.DestroyType, "", byDev, 0),
			ws: workspaceOf("dev", byDev), reason: RefusedUnrecorded, uid: "uid-planted"},
		{name: "a Stack's own, recorded before records held a UID", upd: updateOf("prod-up", "prod", autov1alpha1.PreviewType, "", byProd, 0),
			change: legacyRecord, ws: prodWS, wait: true, reason: RefusedUnrecorded},
		{name: "a Stack's own, recorded before records held a UID, never recorded again", upd: updateOf("prod-up", "prod", autov1alpha1.PreviewType, "", byProd, RecordGrace),
			change: legacyRecord, ws: prodWS, reason: RefusedUnrecorded},
		{name: "a user's Update in an ungoverned Stack's Workspace", upd: updateOf("by-hand", "dev", autov1alpha1.RefreshType, "", nil, 0),
			ws: workspaceOf("dev", byDev), reason: RefusedForeignUpdate},
		{name: "planted: a foreign kind's controller named prod with prod's UID", upd: updateOf("planted", "prod", autov1alpha1.DestroyType, "", controllerRef(foreignKind, "prod", "uid-prod"), 0),
			ws: prodWS, reason: RefusedForeignUpdate},
		{name: "planted: prod's controller, not recorded yet", upd: updateOf("planted", "prod", autov1alpha1.DestroyType, "", byProd, time.Second),
			ws: prodWS, wait: true, reason: RefusedUnrecorded},
		{name: "planted: prod's controller, never recorded", upd: updateOf("planted", "prod", autov1alpha1.DestroyType, "", byProd, RecordGrace),
			ws: prodWS, reason: RefusedUnrecorded},
		{name: "the Stack's own, made by another Stack of its name", upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "", controllerRef(stackKind, "prod", "uid-old"), 0),
			ws: workspaceOf("prod", controllerRef(stackKind, "prod", "uid-old")), reason: RefusedMakerGone},
		{name: "a governed Stack's drift check", upd: updateOf("prod-up", "prod", autov1alpha1.PreviewType, "", byProd, 0),
			ws: prodWS, want: AuthorityStack},
		{name: "a governed Stack's up held to its promotion's plan", upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0),
			ws: prodWS, want: AuthorityPromotion, checked: true},
		{name: "a governed Stack's up held to the plan of a promotion made before records",
			change: func(w *world, c client.Client) {
				legacy := *w.promoteProd.Preview
				must(c.Delete(context.Background(), w.promoteProd))
				w.promote.Status.Previews = []promotionv1alpha1.StackPreview{legacy}
				must(c.Status().Update(context.Background(), w.promote))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, want: AuthorityPromotion, checked: true},
		{name: "a governed Stack's up held to a plan whose record someone else replaced",
			change: func(w *world, c client.Client) { forgeRecord(w, c, nil) },
			upd:    updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "a governed Stack's up held to a plan whose record claims another promotion of the name",
			change: func(w *world, c client.Client) {
				forgeRecord(w, c, controllerRef(promotionKind, "promote", "uid-other"))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "a governed Stack's up applying again what its promotion approved",
			change: func(w *world, c client.Client) { deployed(w, c, nil) },
			upd:    updateOf("prod-up", "prod", autov1alpha1.UpType, "", byProd, 0), ws: prodWS, want: AuthorityStack, checked: true},
		{name: "a governed Stack's up applying again what it reads since its promotion",
			change: func(w *world, c client.Client) {
				deployed(w, c, nil)
				w.token.Data["accessToken"] = []byte("another")
				must(c.Update(context.Background(), w.token))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "", byProd, 0), ws: prodWS, reason: RefusedUnapproved},
		{name: "a governed Stack's up of a spec changed since its promotion (a held change)",
			change: func(w *world, c client.Client) {
				deployed(w, c, func(s *pulumiv1.Stack) { s.Spec.Refresh = true })
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "", byProd, 0), ws: prodWS, reason: RefusedHeld},
		{name: "a governed Stack's drift check of a held change",
			change: func(w *world, c client.Client) {
				w.prod.Spec.Config = map[string]apiextensionsv1.JSON{"k": {Raw: []byte(`"changed"`)}}
				must(c.Update(context.Background(), w.prod))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.PreviewType, "", byProd, 0), ws: prodWS, reason: RefusedHeld},
		{name: "a governed Stack's up held to its promotion's plan, the spec changed since",
			change: func(w *world, c client.Client) {
				w.prod.Spec.Refresh = true
				must(c.Update(context.Background(), w.prod))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedHeld},
		{name: "a governed Stack's up applying again what no promotion pinned",
			change: func(w *world, c client.Client) {
				deployed(w, c, func(s *pulumiv1.Stack) { s.Annotations[shared.ReconcileRequestAnnotation] = "again" })
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "", byProd, 0), ws: prodWS, reason: RefusedUnapproved},
		{name: "a governed Stack's first up, as its governor wrote it", upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "", byProd, 0),
			ws: prodWS, want: AuthorityStack},
		{name: "held to another plan", upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "other.plan", byProd, 0),
			ws: prodWS, reason: RefusedPin},
		{name: "held to a plan after its promotion failed",
			change: func(w *world, c client.Client) {
				w.promote.Status.Phase = promotionv1alpha1.PromotionFailed
				must(c.Status().Update(context.Background(), w.promote))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "held to a plan whose promotion was replaced by another of its name",
			change: func(w *world, c client.Client) {
				must(c.Delete(context.Background(), w.promote))
				w.promote.ResourceVersion, w.promote.UID = "", "uid-impostor"
				must(c.Create(context.Background(), w.promote))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "held to a plan of a promotion whose rollout has not reached the Stack",
			change: func(w *world, c client.Client) {
				w.promote.Status.Stacks[0].State = promotionv1alpha1.StackPending
				must(c.Status().Update(context.Background(), w.promote))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "held to a plan of an aborted rollout that skipped the Stack",
			change: func(w *world, c client.Client) {
				w.promote.Status.Stacks[0].State = promotionv1alpha1.StackSkipped
				must(c.Status().Update(context.Background(), w.promote))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "held to a plan of a rollout that reached the Stack",
			change: func(w *world, c client.Client) {
				w.promote.Status.Stacks[0].State = promotionv1alpha1.StackUpdating
				must(c.Status().Update(context.Background(), w.promote))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, want: AuthorityPromotion, checked: true},
		{name: "held to a plan whose Secret was replaced after the preview",
			change: func(w *world, c client.Client) {
				w.plan.Data[autov1alpha1.PlanKey] = []byte("another plan")
				must(c.Update(context.Background(), w.plan))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "held to a plan of a promotion into another stage",
			change: func(w *world, c client.Client) {
				w.prod.Annotations[shared.ReconcileRequestAnnotation] = PinRequest("peek", "uid-peek")
				must(c.Update(context.Background(), w.prod))
			},
			upd: updateOf("prod-up", "prod", autov1alpha1.UpType, "promote-prod.plan", byProd, 0), ws: prodWS, reason: RefusedPin},
		{name: "the Stack's own, recorded, but not the current one", upd: updateOf("prod-old", "prod", autov1alpha1.UpType, "", byProd, time.Hour),
			ws: prodWS, reason: RefusedUnrecorded},
		{name: "a promotion's preview of the Stack it deploys", upd: updateOf(PreviewName("promote", "prod", 1), PreviewName("promote", "prod", 1), autov1alpha1.PreviewType, "", byPromote, 0),
			ws: previewWorkspaceOf("promote", "prod", byPromote), want: AuthorityPromotionPreview},
		{name: "a promotion's up in a preview's Workspace", upd: updateOf(PreviewName("promote", "prod", 1), PreviewName("promote", "prod", 1), autov1alpha1.UpType, "", byPromote, 0),
			ws: previewWorkspaceOf("promote", "prod", byPromote), reason: RefusedNotPreview},
		{name: "a preview-only stage previewing a governed Stack without consent", upd: updateOf(PreviewName("peek", "prod", 1), PreviewName("peek", "prod", 1), autov1alpha1.PreviewType, "", byPeek, 0),
			ws: previewWorkspaceOf("peek", "prod", byPeek), reason: RefusedNoConsent},
		{name: "a preview-only stage previewing a governed Stack that lets it",
			change: func(w *world, c client.Client) {
				w.prod.Annotations[promotionv1alpha1.PreviewStagesAnnotation] = "qa, peek"
				must(c.Update(context.Background(), w.prod))
			},
			upd: updateOf(PreviewName("peek", "prod", 1), PreviewName("peek", "prod", 1), autov1alpha1.PreviewType, "", byPeek, 0),
			ws:  previewWorkspaceOf("peek", "prod", byPeek), want: AuthorityPromotionPreview},
		{name: "a preview-only stage previewing an ungoverned Stack", upd: updateOf(PreviewName("peek", "dev", 1), PreviewName("peek", "dev", 1), autov1alpha1.PreviewType, "", byPeek, 0),
			ws: previewWorkspaceOf("peek", "dev", byPeek), want: AuthorityPromotionPreview},
		{name: "a promotion's preview in another preview's Workspace", upd: updateOf(PreviewName("peek", "dev", 1), PreviewName("peek", "prod", 1), autov1alpha1.PreviewType, "", byPeek, RecordGrace),
			ws: previewWorkspaceOf("peek", "prod", byPeek), reason: RefusedUnrecorded},
		{name: "a preview of a promotion that has ended",
			change: func(w *world, c client.Client) {
				w.peek.Status.Phase = promotionv1alpha1.PromotionAborted
				must(c.Status().Update(context.Background(), w.peek))
			},
			upd: updateOf(PreviewName("peek", "dev", 1), PreviewName("peek", "dev", 1), autov1alpha1.PreviewType, "", byPeek, 0),
			ws:  previewWorkspaceOf("peek", "dev", byPeek), reason: RefusedMakerGone},
		{name: "a pull request's preview for a stage the Stack names", upd: updateOf(prWS, prWS, autov1alpha1.PreviewType, "", byPipe, 0),
			ws: workspaceOf(prWS, byPipe), want: AuthorityPullRequestPreview},
		{name: "a pull request's preview for a stage that no longer lists the Stack",
			change: func(w *world, c client.Client) {
				w.stage.Spec.Stacks = nil
				must(c.Update(context.Background(), w.stage))
			},
			upd: updateOf(prWS, prWS, autov1alpha1.PreviewType, "", byPipe, 0), ws: workspaceOf(prWS, byPipe), reason: RefusedNoConsent},
		{name: "a pull request's preview for a stage the Stack does not name",
			change: func(w *world, c client.Client) {
				w.prod.Annotations[promotionv1alpha1.AuthorizedStageAnnotation] = "elsewhere"
				must(c.Update(context.Background(), w.prod))
			},
			upd: updateOf(prWS, prWS, autov1alpha1.PreviewType, "", byPipe, 0), ws: workspaceOf(prWS, byPipe), reason: RefusedNoConsent},
		{name: "a promotion's preview whose record someone else made",
			change: func(w *world, c client.Client) { forgeRecord(w, c, nil) },
			upd:    updateOf(PreviewName("promote", "prod", 1), PreviewName("promote", "prod", 1), autov1alpha1.PreviewType, "", byPromote, RecordGrace),
			ws:     previewWorkspaceOf("promote", "prod", byPromote), reason: RefusedUnrecorded},
		{name: "a promotion's preview in a Workspace whose label names another Stack",
			upd: updateOf(PreviewName("promote", "prod", 1), PreviewName("promote", "prod", 1), autov1alpha1.PreviewType, "", byPromote, RecordGrace),
			ws: func() *autov1alpha1.Workspace {
				ws := previewWorkspaceOf("promote", "prod", byPromote)
				ws.Labels[promotionv1alpha1.StackLabel] = "dev"
				return ws
			}(), reason: RefusedUnrecorded},
		{name: "a promotion's preview in a Workspace made in place of the recorded one",
			upd: updateOf(PreviewName("promote", "prod", 1), PreviewName("promote", "prod", 1), autov1alpha1.PreviewType, "", byPromote, RecordGrace),
			ws:  planted(previewWorkspaceOf("promote", "prod", byPromote)), reason: RefusedUnrecorded},
		{name: "a pull request's preview Update made in place of the recorded one", upd: updateOf(prWS, prWS, autov1alpha1.PreviewType, "", byPipe, RecordGrace),
			ws: workspaceOf(prWS, byPipe), uid: "uid-planted", reason: RefusedUnrecorded},
		{name: "a Pipeline's Update it did not record", upd: updateOf("pipe-other", prWS, autov1alpha1.PreviewType, "", byPipe, RecordGrace),
			ws: workspaceOf(prWS, byPipe), reason: RefusedUnrecorded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, c := newWorld(t)
			if tt.change != nil {
				tt.change(w, c)
			}
			if tt.uid != "" {
				tt.upd.UID = tt.uid
			}
			v, err := Authorize(ctx, c, tt.upd, tt.ws, authorizeNow)
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != (tt.want != "") || v.By != tt.want || v.Wait != tt.wait || v.Reason != tt.reason {
				t.Fatalf("Authorize = %+v; want by %q, wait %v, reason %q", v, tt.want, tt.wait, tt.reason)
			}
			if v.Message == "" {
				t.Error("the verdict says nothing")
			}
			var token corev1.Secret
			must(c.Get(ctx, client.ObjectKeyFromObject(w.token), &token))
			if got, ok := v.Reads["Secret/token"]; tt.checked != ok || (ok && got != token.ResourceVersion) || (!tt.checked && v.Reads != nil) {
				t.Errorf("Reads = %v; want the token Secret at %s: %v", v.Reads, token.ResourceVersion, tt.checked)
			}
			if !v.Allowed && !v.Wait && !strings.Contains(v.Message, ": ") {
				t.Errorf("the refusal %q names no field", v.Message)
			}
			if v.Wait != (v.Recheck > 0) {
				t.Errorf("a wait says when to look again, and only a wait: wait %v, recheck %v", v.Wait, v.Recheck)
			}
		})
	}
}

// forgeRecord replaces promote's record of prod by one with the same
// name, labels and content, made by someone who may create
// StackPromotions (the admission policy stops them; this is what the
// choke point does if it did not): controlled by owners, nil for none.
func forgeRecord(w *world, c client.Client, owners []metav1.OwnerReference) {
	must(c.Delete(context.Background(), w.promoteProd))
	forged := w.promoteProd.DeepCopy()
	forged.ResourceVersion, forged.UID, forged.OwnerReferences = "", "uid-forged", owners
	must(c.Create(context.Background(), forged))
}

// legacyRecord makes prod's record of its current Update one written
// before stackyard recorded UIDs.
func legacyRecord(w *world, c client.Client) {
	w.prod.Status.CurrentUpdate.UID = ""
	must(c.Status().Update(context.Background(), w.prod))
}

// TestAuthorizeWorkspace decides whether a Workspace's agent, which
// starts with the environment of the Stack it was made from, may start.
func TestAuthorizeWorkspace(t *testing.T) {
	ctx := context.Background()
	young := func(ws *autov1alpha1.Workspace) *autov1alpha1.Workspace {
		ws.CreationTimestamp = metav1.NewTime(authorizeNow)
		return ws
	}
	old := func(ws *autov1alpha1.Workspace) *autov1alpha1.Workspace {
		ws.CreationTimestamp = metav1.NewTime(authorizeNow.Add(-RecordGrace))
		return ws
	}
	head := strings.Repeat("e", 40)
	for _, tt := range []struct {
		name   string
		ws     *autov1alpha1.Workspace
		want   Authority
		wait   bool
		reason string
	}{
		{"a user's", workspaceOf("mine", nil), AuthorityOwnWorkspace, false, ""},
		{"a Stack's", workspaceOf("prod", controllerRef(stackKind, "prod", "uid-prod")), AuthorityStack, false, ""},
		{"a gone Stack's", workspaceOf("prod", controllerRef(stackKind, "prod", "uid-gone")), "", false, RefusedMakerGone},
		{"a promotion's preview of the Stack it deploys", previewWorkspaceOf("promote", "prod", controllerRef(promotionKind, "promote", "uid-promote")),
			AuthorityPromotionPreview, false, ""},
		{"a preview-only stage's preview of a governed Stack without consent", previewWorkspaceOf("peek", "prod", controllerRef(promotionKind, "peek", "uid-peek")),
			"", false, RefusedNoConsent},
		{"a promotion's Workspace it has not recorded yet", young(workspaceOf("peek-other", controllerRef(promotionKind, "peek", "uid-peek"))),
			"", true, RefusedUnrecorded},
		{"a promotion's Workspace it never recorded", old(workspaceOf("peek-other", controllerRef(promotionKind, "peek", "uid-peek"))),
			"", false, RefusedUnrecorded},
		{"a pull request's preview", workspaceOf(PullRequestPreviewName("pipe", 7, "prod", head), controllerRef(pipelineKind, "pipe", "uid-pipe")),
			AuthorityPullRequestPreview, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, c := newWorld(t)
			v, err := AuthorizeWorkspace(ctx, c, tt.ws, authorizeNow)
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != (tt.want != "") || v.By != tt.want || v.Wait != tt.wait || v.Reason != tt.reason {
				t.Fatalf("AuthorizeWorkspace = %+v; want by %q, wait %v, reason %q", v, tt.want, tt.wait, tt.reason)
			}
		})
	}
}

// TestAuthorizeStackWorkspace runs nothing in a Workspace that claims a
// Stack until the Stack records it (status.workspace) by name and UID: one
// made in place of the recorded one is refused once the Stack has had
// time to record it.
func TestAuthorizeStackWorkspace(t *testing.T) {
	ctx := context.Background()
	byProd := controllerRef(stackKind, "prod", "uid-prod")
	replaced := func(age time.Duration) *autov1alpha1.Workspace {
		ws := workspaceOf("prod", byProd)
		ws.UID, ws.CreationTimestamp = "uid-planted", metav1.NewTime(authorizeNow.Add(-age))
		return ws
	}
	for _, tt := range []struct {
		name     string
		ws       *autov1alpha1.Workspace
		unrecord bool // the Stack has no status.workspace
		upd      bool // ask Authorize (an up) rather than AuthorizeWorkspace
		wait     bool
		reason   string
	}{
		{name: "recorded", ws: workspaceOf("prod", byProd)},
		{name: "recorded, an up in it", ws: workspaceOf("prod", byProd), upd: true},
		{name: "no record yet", ws: workspaceOf("prod", byProd), unrecord: true, wait: true, reason: RefusedUnrecorded},
		{name: "no record yet, an up in it", ws: workspaceOf("prod", byProd), unrecord: true, upd: true, wait: true, reason: RefusedUnrecorded},
		{name: "made in place of the recorded one, just now", ws: replaced(time.Second), wait: true, reason: RefusedUnrecorded},
		{name: "made in place of the recorded one", ws: replaced(RecordGrace), reason: RefusedUnrecorded},
		{name: "made in place of the recorded one, an up in it", ws: replaced(RecordGrace), upd: true, reason: RefusedUnrecorded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, c := newWorld(t)
			if tt.unrecord {
				w.prod.Status.Workspace = nil
				must(c.Status().Update(ctx, w.prod))
			}
			var v Verdict
			var err error
			if tt.upd {
				v, err = Authorize(ctx, c, updateOf("prod-up", "prod", autov1alpha1.PreviewType, "", byProd, 0), tt.ws, authorizeNow)
			} else {
				v, err = AuthorizeWorkspace(ctx, c, tt.ws, authorizeNow)
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != (tt.reason == "") || v.Wait != tt.wait || v.Reason != tt.reason {
				t.Fatalf("verdict %+v; want wait %v, reason %q", v, tt.wait, tt.reason)
			}
			if !v.Allowed && !strings.Contains(v.Message, "status.workspace") {
				t.Errorf("the verdict %q does not name status.workspace", v.Message)
			}
		})
	}
}

// deployed records that prod deployed its current generation, after
// change (if any) was made to it: what an up of it now would apply again.
func deployed(w *world, c client.Client, change func(*pulumiv1.Stack)) {
	ctx := context.Background()
	if change != nil {
		change(w.prod)
		must(c.Update(ctx, w.prod))
	}
	must(c.Get(ctx, client.ObjectKeyFromObject(w.prod), w.prod))
	w.prod.Status.LastUpdate = &shared.StackUpdateState{State: shared.SucceededStackStateMessage, Generation: w.prod.Generation}
	must(c.Status().Update(ctx, w.prod))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// TestNoPreview: a governed Stack is previewed only by its stage and the
// stages it names; an ungoverned one by any.
func TestNoPreview(t *testing.T) {
	governed := map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod", promotionv1alpha1.PreviewStagesAnnotation: " qa ,, staging"}
	for _, tt := range []struct {
		stage       string
		annotations map[string]string
		ok          bool
	}{
		{"prod", governed, true},
		{"qa", governed, true},
		{"staging", governed, true},
		{"peek", governed, false},
		{"peek", nil, true},
		{"peek", map[string]string{promotionv1alpha1.PreviewStagesAnnotation: "qa"}, true},
	} {
		msg := NoPreview(tt.stage, "web", tt.annotations)
		if (msg == "") != tt.ok {
			t.Errorf("NoPreview(%s, %v) = %q; want allowed %v", tt.stage, tt.annotations, msg, tt.ok)
		}
		if msg != "" && !strings.Contains(msg, promotionv1alpha1.PreviewStagesAnnotation) {
			t.Errorf("the refusal %q does not say how to consent", msg)
		}
	}
}

func TestRecordRecheck(t *testing.T) {
	for _, tt := range []struct {
		age  time.Duration
		want time.Duration
	}{
		{0, 200 * time.Millisecond},
		{4 * time.Second, 200 * time.Millisecond},
		{recordSoon, 2 * time.Second},
		{RecordGrace - time.Second, 2 * time.Second},
	} {
		if got := RecordRecheck(tt.age); got != tt.want {
			t.Errorf("RecordRecheck(%v) = %v, want %v", tt.age, got, tt.want)
		}
	}
}
