package change

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/agent/readset"
)

// The choke point. Every operation the operator runs (preview, up,
// refresh, destroy) runs in a Workspace, as an Update, and the Update
// controller asks Authorize, and nothing else, right before it calls the
// agent. Authorize allows an operation only when it can name who
// authorized it from what the operator itself recorded: the UID of the
// object that made the Workspace and the Update, read live, and that
// maker's status, which only the operator writes (config/policy). What an
// object says of itself (its name, labels, annotations, owner references
// of any other kind, its status) is a claim, and a claim authorizes
// nothing: whatever Authorize cannot prove, it refuses.
//
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions;pipelines;stages,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get

// Authority is who authorized an operation Authorize allowed.
type Authority string

const (
	// AuthorityOwnWorkspace: the Workspace was made by none of the
	// operator's makers (a Stack, a Promotion, a Pipeline). It holds what
	// its maker gave it, and whoever may create Updates runs what they
	// like in it, as in the Pulumi Kubernetes Operator.
	AuthorityOwnWorkspace Authority = "OwnWorkspace"
	// AuthorityStack: the Stack's own reconcile, recorded as its
	// status.currentUpdate. For a governed Stack, an operation that is not
	// an up held to a plan: a drift check, a refresh, its own retry, or an
	// up of a spec a governor wrote.
	AuthorityStack Authority = "Stack"
	// AuthorityPromotion: an up of a governed Stack held to the plan of
	// the running promotion that pinned it, with the plan and inputs that
	// promotion previewed.
	AuthorityPromotion Authority = "Promotion"
	// AuthorityPromotionPreview: a promotion's preview of a Stack that
	// lets the promotion's stage preview it (NoPreview).
	AuthorityPromotionPreview Authority = "PromotionPreview"
	// AuthorityPullRequestPreview: a Pipeline's preview of a pull request
	// against a Stack of one of its stages that lets that stage preview
	// it.
	AuthorityPullRequestPreview Authority = "PullRequestPreview"
)

// Why Authorize refuses an operation: the reason of the refused Update's
// Failed condition, its event and the label of the refusal metric.
const (
	// RefusedForeignUpdate: the Update was not made by the maker of the
	// operator-made Workspace it names.
	RefusedForeignUpdate = "ForeignUpdate"
	// RefusedMakerGone: the maker named is gone, or another object has
	// its name (its UID differs).
	RefusedMakerGone = "MakerGone"
	// RefusedUnrecorded: the maker has no record of the Update.
	RefusedUnrecorded = "Unrecorded"
	// RefusedNotPreview: an operation other than a preview in a preview's
	// Workspace.
	RefusedNotPreview = "NotPreview"
	// RefusedNoConsent: the Stack does not let the stage preview it.
	RefusedNoConsent = "NoConsent"
	// RefusedPin: an up held to a plan that the running promotion which
	// pinned the Stack did not approve, or that no running promotion
	// holds, or whose inputs changed since it was previewed.
	RefusedPin = "UnapprovedPin"
	// RefusedUnapproved: an up of a governed Stack, not held to a plan,
	// that would apply again what it deployed (a resync, a drift
	// remediation, a reconcile request) while what it reads is not what
	// the promotion that pinned it approved.
	RefusedUnapproved = "Unapproved"
	// RefusedHeld: an operation of a governed Stack whose spec is not the
	// one approved for it (SpecApproved): a held change.
	RefusedHeld = "ChangeHeld"
)

// RecordGrace is how long Authorize waits for the maker of an Update to
// record it before it refuses the Update. A maker records what it made in
// the status it patches at the end of the reconcile that made it, within
// moments; an Update nobody recorded after this long is nobody's.
const RecordGrace = time.Minute

// Verdict is Authorize's answer.
type Verdict struct {
	// Allowed is true when the operation may run; By says who authorized
	// it.
	Allowed bool
	By      Authority
	// Wait is true when the operation may not run yet: its maker has not
	// recorded it, and may still.
	Wait bool
	// Recheck is, with Wait, how soon to decide again (RecordRecheck).
	Recheck time.Duration
	// Reason is one of the Refused* constants when the operation is
	// refused.
	Reason string
	// Message says, naming the field, who authorized the operation, why
	// it waits, or why it is refused.
	Message string
	// Reads are the versions of the Secrets and ConfigMaps the decision
	// found to be what a promotion previewed, when it compared them (a
	// governed Stack's up); nil otherwise. The agent runs the operation
	// only with exactly these (readset.Mismatch).
	Reads readset.Set
}

func allow(by Authority, format string, args ...any) Verdict {
	return Verdict{Allowed: true, By: by, Message: fmt.Sprintf(format, args...)}
}

func refuse(reason, format string, args ...any) Verdict {
	return Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// unrecorded waits for a maker to record obj, then refuses it once
// RecordGrace has passed since obj was made.
func unrecorded(obj metav1.Object, now time.Time, format string, args ...any) Verdict {
	msg := fmt.Sprintf(format, args...)
	age := now.Sub(obj.GetCreationTimestamp().Time)
	if age < RecordGrace {
		return Verdict{Wait: true, Recheck: RecordRecheck(age), Reason: RefusedUnrecorded, Message: "waiting for its maker to record it: " + msg}
	}
	return refuse(RefusedUnrecorded, "%s", msg)
}

// RecordRecheck is how soon an object of age, whose maker has not
// recorded it yet, is decided on again. A maker records what it made in
// the status patch that ends the reconcile that made it, so the record
// usually comes within moments: a new object is looked at again soon, so
// that a preview or an update does not wait seconds for nothing. After
// recordSoon it is looked at every 2 s until RecordGrace refuses it: an
// object planted unrecorded costs about 25 live reads in its first
// seconds, then one every 2 s.
func RecordRecheck(age time.Duration) time.Duration {
	if age < recordSoon {
		return 200 * time.Millisecond
	}
	return 2 * time.Second
}

// recordSoon is how long after its creation an object waiting for its
// maker's record is looked at often (RecordRecheck).
const recordSoon = 5 * time.Second

// Maker is the object of one of the operator's kinds that controls a
// Workspace or an Update: a Stack, a Promotion or a Pipeline.
type Maker struct {
	Kind, Name string
	UID        string
}

func (m *Maker) String() string { return m.Kind + " " + m.Name }

// makers are the kinds whose controller references config/policy lets
// only the operator write, by API group.
var makers = map[string][]string{
	pulumiv1.GroupVersion.Group:          {"Stack"},
	promotionv1alpha1.GroupVersion.Group: {"Promotion", "Pipeline"},
}

// MakerOf is the maker that controls obj, or nil when its controller (if
// any) is of no kind the operator makes Workspaces and Updates for. The
// group and kind must match exactly: a reference to a kind of another
// group, whatever its name and UID, is not the operator's.
func MakerOf(obj metav1.Object) *Maker {
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || !slices.Contains(makers[gv.Group], ref.Kind) {
		return nil
	}
	return &Maker{Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
}

// Authorize decides whether the operation upd may run in ws, at now. It is
// the operator's one choke point: the Update controller asks it right
// before it calls the agent, and runs nothing it does not allow. It reads
// the makers, the Stacks and the promotions live, through r; an error is
// a failed read, to be retried.
func Authorize(ctx context.Context, r client.Reader, upd *autov1alpha1.Update, ws *autov1alpha1.Workspace, now time.Time) (Verdict, error) {
	return decide(ctx, r, ws, upd, now)
}

// AuthorizeWorkspace decides, as Authorize does, whether the agent of ws
// may start: an agent starts with the Workspace's environment, the
// Secrets of the Stack it was made from included. The Workspace
// controller asks it before it starts one.
func AuthorizeWorkspace(ctx context.Context, r client.Reader, ws *autov1alpha1.Workspace, now time.Time) (Verdict, error) {
	return decide(ctx, r, ws, nil, now)
}

// decide is Authorize, and AuthorizeWorkspace when upd is nil.
func decide(ctx context.Context, r client.Reader, ws *autov1alpha1.Workspace, upd *autov1alpha1.Update, now time.Time) (Verdict, error) {
	wsMaker := MakerOf(ws)
	if wsMaker == nil {
		return allow(AuthorityOwnWorkspace, "workspace %s is no Stack's, Promotion's or Pipeline's", ws.Name), nil
	}
	if upd != nil {
		if m := MakerOf(upd); m == nil || *m != *wsMaker {
			return refuse(RefusedForeignUpdate, "metadata.ownerReferences: workspace %s was made by %s, "+
				"which did not make this Update: only the maker of an operator's Workspace runs operations in it", ws.Name, wsMaker), nil
		}
	}
	a := authorizer{r: r, upd: upd, ws: ws, maker: wsMaker, now: now}
	switch wsMaker.Kind {
	case "Stack":
		return a.stack(ctx)
	case "Promotion":
		return a.promotionPreview(ctx)
	default:
		return a.pullRequestPreview(ctx)
	}
}

// subject is what a decision waits for the record of: the Update, or the
// Workspace when there is none.
func (a *authorizer) subject() metav1.Object {
	if a.upd != nil {
		return a.upd
	}
	return a.ws
}

// authorizer holds what one Authorize decides on.
type authorizer struct {
	r     client.Reader
	upd   *autov1alpha1.Update // nil when only the Workspace's agent is to start
	ws    *autov1alpha1.Workspace
	maker *Maker
	now   time.Time
}

// get reads the maker (or another object) name into obj, live. found is
// false when it is gone, or when uid is set and the object found has
// another.
func (a *authorizer) get(ctx context.Context, name, uid string, obj client.Object) (found bool, err error) {
	err = a.r.Get(ctx, client.ObjectKey{Namespace: a.ws.Namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return uid == "" || string(obj.GetUID()) == uid, nil
}

func (a *authorizer) gone() Verdict {
	return refuse(RefusedMakerGone, "metadata.ownerReferences: %s, which made workspace %s, "+
		"no longer exists: nothing runs in its Workspace", a.maker, a.ws.Name)
}

// stack decides on an operation in a Stack's own Workspace: the Stack's
// reconcile, which recorded the Update as its current one; for a governed
// Stack's up held to a plan, also the running promotion that pinned it.
func (a *authorizer) stack(ctx context.Context) (Verdict, error) {
	stack := &pulumiv1.Stack{}
	if found, err := a.get(ctx, a.maker.Name, a.maker.UID, stack); !found || err != nil {
		return a.gone(), err
	}
	switch rec := stack.Status.Workspace; {
	case rec == nil:
		// A Stack from before stackyard recorded Workspaces, or one that
		// has just made this one: the Stack's reconcile records it, or
		// deletes it when it cannot prove it made it.
		return Verdict{Wait: true, Recheck: RecordRecheck(a.now.Sub(a.ws.CreationTimestamp.Time)), Reason: RefusedUnrecorded, Message: fmt.Sprintf(
			"waiting for Stack %s to record workspace %s as its own (status.workspace)", stack.Name, a.ws.Name)}, nil
	case rec.Name != a.ws.Name || rec.UID != a.ws.UID:
		return unrecorded(a.ws, a.now, "status.workspace: Stack %s recorded workspace %s with UID %s as its own, not this one (UID %s)",
			stack.Name, rec.Name, rec.UID, a.ws.UID), nil
	}
	if a.upd == nil {
		return allow(AuthorityStack, "the Workspace of Stack %s, made from its spec", stack.Name), nil
	}
	if cur := stack.Status.CurrentUpdate; cur == nil || cur.Name != a.upd.Name {
		running := "none"
		if cur != nil {
			running = cur.Name
		}
		return unrecorded(a.upd, a.now, "status.currentUpdate: Stack %s records %s as its current update, not this one", stack.Name, running), nil
	} else if cur.UID == "" {
		return unrecorded(a.upd, a.now, "status.currentUpdate.uid: Stack %s recorded %s without its UID, which proves nothing: "+
			"the Stack drops it and makes another", stack.Name, cur.Name), nil
	} else if cur.UID != a.upd.UID {
		return refuse(RefusedUnrecorded, "status.currentUpdate.uid: Stack %s recorded the update it made under this name with UID %s; "+
			"this one (UID %s) was made in its place by someone else", stack.Name, cur.UID, a.upd.UID), nil
	}
	stage := AuthorizedStage(stack.Annotations)
	if stage == "" {
		return allow(AuthorityStack, "the reconcile of Stack %s, which no stage governs", stack.Name), nil
	}
	// Every operation runs with the spec's inputs: a held change's
	// runs nothing, not even a refresh or a destroy.
	if ok, msg, err := SpecApproved(stack); err != nil || !ok {
		return refuse(RefusedHeld, "%s", msg), err
	}
	switch {
	case a.upd.Spec.Type != autov1alpha1.UpType:
		return allow(AuthorityStack, "the reconcile of Stack %s (governed by stage %s): a %s changes nothing it deploys",
			stack.Name, stage, a.upd.Spec.Type), nil
	case a.upd.Spec.PlanSecret != "":
		return a.pin(ctx, stack, stage)
	}
	reason, msg, reads, err := unplannedUp(ctx, a.r, stack)
	if err != nil || reason != "" {
		return refuse(reason, "%s", msg), err
	}
	v := allow(AuthorityStack, "the up of Stack %s (governed by stage %s) of what its governors wrote or its promotion approved", stack.Name, stage)
	v.Reads = reads
	return v, nil
}

// UnplannedUp decides whether stack, which a stage governs, may run an up
// that no plan holds. Its spec must be approved (SpecApproved): a held
// change runs nothing. Then its first up, a retry after a failure, and
// the up of a generation it has not deployed yet apply that approved
// spec. Any other up applies again
// what it deployed (a resync, a drift remediation, a reconcile request):
// it may only while what the Stack reads (StackDigest) is what the
// promotion that pinned it previewed, so that a Secret or ConfigMap
// written since by someone else is not applied. reason is
// RefusedUnapproved, with a message naming the field, or "" when the up
// may run. The Stack controller asks it before it makes the Update, and
// the choke point again before the Update runs.
func UnplannedUp(ctx context.Context, r client.Reader, stack *pulumiv1.Stack) (reason, msg string, err error) {
	reason, msg, _, err = unplannedUp(ctx, r, stack)
	return reason, msg, err
}

// unplannedUp is UnplannedUp, with the versions of the Secrets and
// ConfigMaps it found to be what the promotion previewed, when it
// compared them.
func unplannedUp(ctx context.Context, r client.Reader, stack *pulumiv1.Stack) (reason, msg string, reads readset.Set, err error) {
	if ok, msg, err := SpecApproved(stack); err != nil || !ok {
		return RefusedHeld, msg, nil, err
	}
	lu := stack.Status.LastUpdate
	if lu == nil || lu.State != shared.SucceededStackStateMessage || lu.Generation != stack.Generation {
		return "", "", nil, nil
	}
	name, p, err := pinnedBy(ctx, r, stack)
	switch {
	case err != nil:
		return "", "", nil, err
	case name == "":
		return RefusedUnapproved, fmt.Sprintf("metadata.annotations[%s]: Stack %s would apply again generation %d, which no promotion pinned, "+
			"with what it reads now, which nobody approved: promote a release to deploy it again", shared.ReconcileRequestAnnotation, stack.Name, stack.Generation), nil, nil
	case p == nil:
		return RefusedUnapproved, fmt.Sprintf("metadata.annotations[%s]: promotion %s, which pinned Stack %s, no longer exists, "+
			"so nothing says what it approved: promote a release to deploy it again", shared.ReconcileRequestAnnotation, name, stack.Name), nil, nil
	}
	pv, err := PreviewOf(ctx, r, p, stack.Name)
	if err != nil {
		return "", "", nil, err
	}
	if pv == nil || pv.Inputs == "" {
		return RefusedUnapproved, fmt.Sprintf("stackpromotions: promotion %s, which pinned Stack %s, recorded no digest of what it previewed: "+
			"promote a release to deploy it again", name, stack.Name), nil, nil
	}
	inputs, err := StackInputs(ctx, r, stack)
	if err != nil {
		return "", "", nil, err
	}
	now, err := Digest(inputs)
	if err != nil {
		return "", "", nil, err
	}
	if now != pv.Inputs {
		return RefusedUnapproved, fmt.Sprintf("spec: what Stack %s reads (its spec, the Secrets and ConfigMaps it names) changed since promotion %s "+
			"previewed it, so applying it again would deploy what nobody approved: promote a release for a new preview and new approvals", stack.Name, name), nil, nil
	}
	return "", "", Reads(inputs), nil
}

// pin decides on a governed Stack's up held to the plan a.upd names: it
// runs only within the promotion that pinned the Stack (the
// reconciliation request, which only a governor or the operator writes on
// a governed Stack, names it by name and UID), while that promotion runs,
// into the stage the Stack names, pinning this Stack to its commit with
// this plan, and while what the Stack reads is what it previewed.
func (a *authorizer) pin(ctx context.Context, stack *pulumiv1.Stack, stage string) (Verdict, error) {
	name, p, err := pinnedBy(ctx, a.r, stack)
	switch {
	case err != nil:
		return Verdict{}, err
	case name == "":
		return refuse(RefusedPin, "spec.planSecret: the up is held to plan %s, but no promotion pinned Stack %s", a.upd.Spec.PlanSecret, stack.Name), nil
	case p == nil:
		return refuse(RefusedPin, "spec.planSecret: promotion %s, which pinned Stack %s, no longer exists", name, stack.Name), nil
	case p.Status.Phase != promotionv1alpha1.PromotionRunning:
		return refuse(RefusedPin, "spec.planSecret: promotion %s, which pinned Stack %s, is %s, not Running: a plan runs only within its promotion",
			name, stack.Name, p.Status.Phase), nil
	case p.Spec.Stage != stage:
		return refuse(RefusedPin, "spec.planSecret: promotion %s is into stage %s, but Stack %s is governed by stage %s", name, p.Spec.Stage, stack.Name, stage), nil
	}
	i := slices.IndexFunc(p.Status.Stacks, func(s promotionv1alpha1.PromotedStack) bool { return s.Name == stack.Name })
	if i < 0 || p.Status.Stacks[i].Commit != stack.Spec.Commit {
		return refuse(RefusedPin, "spec.commit: promotion %s does not pin Stack %s to commit %s", name, stack.Name, stack.Spec.Commit), nil
	}
	// A rollout pins a Stack only once its record says the rollout
	// reached it: a Stack still Pending (its wave has not come) or Skipped
	// (the promotion was aborted first) runs nothing of it.
	if state := p.Status.Stacks[i].State; state == promotionv1alpha1.StackPending || state == promotionv1alpha1.StackSkipped {
		return refuse(RefusedPin, "spec.commit: promotion %s has not reached Stack %s (it is %s in its rollout)", name, stack.Name, state), nil
	}
	pv, err := PreviewOf(ctx, a.r, p, stack.Name)
	if err != nil {
		return Verdict{}, err
	}
	if pv == nil || pv.Plan != a.upd.Spec.PlanSecret {
		return refuse(RefusedPin, "spec.planSecret: plan %s is not the one promotion %s previewed for Stack %s", a.upd.Spec.PlanSecret, name, stack.Name), nil
	}
	var reads readset.Set
	if pv.Inputs != "" && pv.PlanDigest != "" {
		approved, err := PinDigest(pv.Inputs, pv.PlanDigest)
		if err != nil {
			return Verdict{}, err
		}
		now, checked, err := currentPin(ctx, a.r, stack, pv.Plan)
		if err != nil {
			return Verdict{}, err
		}
		if now != approved {
			return refuse(RefusedPin, "spec: what Stack %s reads (its spec, the Secrets and ConfigMaps it names, plan %s) changed since promotion %s previewed it",
				stack.Name, pv.Plan, name), nil
		}
		reads = checked
	}
	v := allow(AuthorityPromotion, "promotion %s into stage %s, which pinned Stack %s to %s with plan %s", name, stage, stack.Name, stack.Spec.Commit, pv.Plan)
	v.Reads = reads
	return v, nil
}

// promotionPreview decides on a preview in a promotion's Workspace: the
// promotion is live and running, records the Update as its preview of a
// Stack, made in that preview's Workspace, and the Stack lets the
// promotion's stage preview it.
func (a *authorizer) promotionPreview(ctx context.Context) (Verdict, error) {
	p := &promotionv1alpha1.Promotion{}
	if found, err := a.get(ctx, a.maker.Name, a.maker.UID, p); !found || err != nil {
		return a.gone(), err
	}
	if p.Status.Phase.IsFinished() {
		return refuse(RefusedMakerGone, "status.phase: promotion %s has ended %s: its previews no longer run", p.Name, p.Status.Phase), nil
	}
	// The Workspace's label names the Stack: a claim, which only finds
	// the record; the record, controlled by the promotion's UID, decides.
	pv, err := PreviewOf(ctx, a.r, p, a.ws.Labels[promotionv1alpha1.StackLabel])
	if err != nil {
		return Verdict{}, err
	}
	if pv == nil || PreviewName(p.Name, pv.Name, pv.Round) != a.ws.Name {
		return unrecorded(a.subject(), a.now, "stackpromotions: promotion %s records no preview in workspace %s", p.Name, a.ws.Name), nil
	}
	if a.upd != nil && pv.Update != a.upd.Name {
		return unrecorded(a.upd, a.now, "stackpromotions: promotion %s runs the preview of Stack %s as Update %s, not this one", p.Name, pv.Name, pv.Update), nil
	}
	if v := a.previewRecorded(pv.Recorded, "stackpromotions.preview.recorded", "promotion "+p.Name); v != nil {
		return *v, nil
	}
	return a.preview(ctx, AuthorityPromotionPreview, p.Spec.Stage, pv.Name, "promotion "+p.Name)
}

// previewRecorded is nil when rec, what a preview's maker (by) recorded
// at field, holds the UIDs of the Workspace and the Update decided on; the
// wait for the record, or once RecordGrace has passed the refusal,
// otherwise: an object made under a preview's name by anyone but its
// maker has another UID.
func (a *authorizer) previewRecorded(rec *promotionv1alpha1.PreviewRecord, field, by string) *Verdict {
	var v Verdict
	switch {
	case rec == nil || rec.Workspace != a.ws.UID:
		v = unrecorded(a.ws, a.now, "%s.workspace: %s has no record of workspace %s (UID %s)", field, by, a.ws.Name, a.ws.UID)
	case a.upd != nil && rec.Update != a.upd.UID:
		v = unrecorded(a.upd, a.now, "%s.update: %s has no record of this Update (UID %s)", field, by, a.upd.UID)
	default:
		return nil
	}
	return &v
}

// pullRequestPreview decides on a preview in a Pipeline's Workspace: the
// Pipeline is live, records the Update as the preview of one of its pull
// requests against a Stack of a stage it previews pull requests for, made
// in that preview's Workspace, and the Stack lets that stage preview it.
func (a *authorizer) pullRequestPreview(ctx context.Context) (Verdict, error) {
	pl := &promotionv1alpha1.Pipeline{}
	if found, err := a.get(ctx, a.maker.Name, a.maker.UID, pl); !found || err != nil {
		return a.gone(), err
	}
	if pl.Status.PullRequests != nil {
		for _, e := range pl.Status.PullRequests.PullRequests {
			for _, sp := range e.Stacks {
				if PullRequestPreviewName(pl.Name, e.Number, sp.Stack, e.Head) != a.ws.Name {
					continue
				}
				if a.upd != nil && sp.Update != a.upd.Name {
					return unrecorded(a.upd, a.now, "status.pullRequests: pipeline %s runs the preview of pull request #%d against Stack %s as Update %s, not this one",
						pl.Name, e.Number, sp.Stack, sp.Update), nil
				}
				if v := a.previewRecorded(sp.Recorded, "status.pullRequests.recorded", "pipeline "+pl.Name); v != nil {
					return *v, nil
				}
				if pl.Spec.PullRequests == nil || !slices.Contains(pl.Spec.PullRequests.Stages, sp.Stage) {
					return refuse(RefusedNoConsent, "spec.pullRequests.stages: pipeline %s no longer previews pull requests for stage %s", pl.Name, sp.Stage), nil
				}
				stage := &promotionv1alpha1.Stage{}
				found, err := a.get(ctx, sp.Stage, "", stage)
				switch {
				case err != nil:
					return Verdict{}, err
				case !found || stage.Spec.Pipeline != pl.Name:
					return refuse(RefusedNoConsent, "spec.pullRequests.stages: stage %s does not belong to pipeline %s", sp.Stage, pl.Name), nil
				}
				switch deploys, err := a.deploys(ctx, stage, sp.Stack); {
				case err != nil:
					return Verdict{}, err
				case !deploys:
					return refuse(RefusedNoConsent, "spec.pullRequests.stages: stage %s of pipeline %s does not deploy Stack %s", sp.Stage, pl.Name, sp.Stack), nil
				}
				return a.preview(ctx, AuthorityPullRequestPreview, sp.Stage, sp.Stack, fmt.Sprintf("pipeline %s, for pull request #%d", pl.Name, e.Number))
			}
		}
	}
	return unrecorded(a.subject(), a.now, "status.pullRequests: pipeline %s records no preview in workspace %s", pl.Name, a.ws.Name), nil
}

// deploys reports whether stage deploys the Stack named name
// (Includes), the Stack read live when the stage does not name it.
func (a *authorizer) deploys(ctx context.Context, stage *promotionv1alpha1.Stage, name string) (bool, error) {
	if slices.ContainsFunc(stage.Spec.Stacks, func(b promotionv1alpha1.StackBinding) bool { return b.Name == name }) {
		return true, nil
	}
	if stage.Spec.StackSelector == nil {
		return false, nil
	}
	stack := &pulumiv1.Stack{}
	found, err := a.get(ctx, name, "", stack)
	if err != nil || !found {
		return false, err
	}
	return Includes(stage, stack), nil
}

// preview decides on a preview, for stage, of the Stack named stackName,
// whose Workspace a maker (by) recorded: only a preview, and only of a
// Stack that lets stage preview it.
func (a *authorizer) preview(ctx context.Context, auth Authority, stage, stackName, by string) (Verdict, error) {
	if a.upd != nil && a.upd.Spec.Type != autov1alpha1.PreviewType {
		return refuse(RefusedNotPreview, "spec.type: %s runs only previews in workspace %s, not %s", by, a.ws.Name, a.upd.Spec.Type), nil
	}
	stack := &pulumiv1.Stack{}
	found, err := a.get(ctx, stackName, "", stack)
	switch {
	case err != nil:
		return Verdict{}, err
	case !found:
		return refuse(RefusedMakerGone, "Stack %s, whose preview %s made, no longer exists", stackName, by), nil
	}
	if msg := NoPreview(stage, stackName, stack.Annotations); msg != "" {
		return refuse(RefusedNoConsent, "metadata.annotations: %s", msg), nil
	}
	return allow(auth, "the preview of Stack %s for stage %s by %s", stackName, stage, by), nil
}

// pinnedBy reads, live, the promotion that pinned stack, as the Stack's
// reconcile request names it (by name and UID; only a governor or the
// operator writes it on a governed Stack). name is "" when the request
// names no promotion; p is nil when that promotion is gone, or another has
// its name.
func pinnedBy(ctx context.Context, r client.Reader, stack *pulumiv1.Stack) (name string, p *promotionv1alpha1.Promotion, err error) {
	name, uid, ok := ParsePinRequest(stack.Annotations[shared.ReconcileRequestAnnotation])
	if !ok {
		return "", nil, nil
	}
	p = &promotionv1alpha1.Promotion{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, p); {
	case apierrors.IsNotFound(err):
		return name, nil, nil
	case err != nil:
		return name, nil, fmt.Errorf("reading promotion %s: %w", name, err)
	case string(p.UID) != uid:
		return name, nil, nil
	}
	return name, p, nil
}

// PreviewOf is the preview promotion p recorded of the Stack named stack
// (its StackPromotion, read through r and controlled by p; for a
// promotion made before them, its status.previews), or nil.
func PreviewOf(ctx context.Context, r client.Reader, p *promotionv1alpha1.Promotion, stack string) (*promotionv1alpha1.StackPreview, error) {
	if stack == "" {
		return nil, nil
	}
	rec, err := StackRecord(ctx, r, p, stack)
	switch {
	case err != nil:
		return nil, err
	case rec == nil:
		return legacyPreview(p, stack), nil
	case rec.Preview == nil || rec.Preview.Name != stack:
		return nil, nil
	}
	return rec.Preview, nil
}

// legacyPreview is the preview of the Stack named stack that promotion p,
// made before StackPromotions, kept in its own status (the deprecated
// status.previews, which only the operator wrote), or nil.
func legacyPreview(p *promotionv1alpha1.Promotion, stack string) *promotionv1alpha1.StackPreview {
	i := slices.IndexFunc(p.Status.Previews, func(pv promotionv1alpha1.StackPreview) bool { return pv.Name == stack })
	if i < 0 {
		return nil
	}
	return &p.Status.Previews[i]
}
