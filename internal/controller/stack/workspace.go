package stack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// reconcileWorkspace keeps the Workspace the Stack needs. With
// workspaceReclaimPolicy Delete the Workspace exists only while an update
// runs, so it is applied when one starts instead.
func (s *session) reconcileWorkspace(ctx context.Context) (sreconcile.Result, error) {
	if reclaimWorkspace(s.stack) {
		return sreconcile.ResultEmpty, nil
	}
	return sreconcile.ResultEmpty, s.applyWorkspace(ctx, applyIfChanged)
}

// applyMode says whether applyWorkspace may skip an apply that looks like
// it would change nothing.
type applyMode int

const (
	// applyAlways sends the apply: the paths that start an Update right
	// after it use it, so the Update never runs on a Workspace that only
	// the cache believes current.
	applyAlways applyMode = iota
	// applyIfChanged skips an apply the last one already made, as far as
	// the cache shows; the resync of every reconcile uses it, and a
	// wrong skip heals on the next one, which a write to the Workspace
	// wakes.
	applyIfChanged
)

// applyWorkspace checks that the Secrets and ConfigMaps the spec names
// exist, then applies the Workspace (server-side apply, so fields others own
// are left alone), owned by the Stack. A missing reference is named by its
// Stack field here: the Workspace's agent could only say that it does not
// start.
//
// With applyIfChanged, an apply that would change nothing is skipped: when
// the Workspace in the cache is, to the resourceVersion, the one this
// operator's last apply of the same content returned (see
// appliedWorkspaces), nobody has written it since as far as the cache
// knows, so applying again would only repeat what the API server already
// holds; and when the cached Workspace already holds every field the apply
// would set (covers), as after a restart. A write by anyone wakes the
// Stack, and the next reconcile applies again if the write changed a field
// the apply sets.
func (s *session) applyWorkspace(ctx context.Context, mode applyMode) error {
	current, err := s.cachedWorkspace(ctx)
	if err != nil {
		return err
	}
	if current != nil {
		if _, err := s.ownWorkspace(ctx, current); err != nil {
			return err
		}
		if err := s.applyOwnership(ctx, current); err != nil {
			return err
		}
	}
	if err := s.checkHandover(ctx, current); err != nil {
		return err
	}
	if mode == applyIfChanged && s.r.applied.settled(current, s.stack.ResourceVersion, sourceKey(s.src)) &&
		!Decide(&s.stack.Spec, s.stack.Status.LastUpdate, s.observed()).Due {
		// An idle resync: nothing the Workspace is built from changed. (An
		// update about to start checks the references below.)
		return nil
	}
	ws, err := stackrun.BuildWorkspace(s.stack, s.src)
	if err != nil {
		return err
	}
	if err := s.checkReferences(ctx); err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(s.stack, ws, s.r.Scheme); err != nil {
		return err
	}
	ws.ManagedFields = nil
	digest := workspaceDigest(ws)
	if current == nil {
		if created, err := s.createWorkspace(ctx, ws, digest); created || err != nil {
			return err
		}
	}
	if mode == applyIfChanged {
		if s.r.applied.unchanged(current, digest) {
			// Remember the Stack as it is now (its own status writes move
			// its resourceVersion), so that the next idle resync is settled.
			s.r.applied.record(current, digest, s.stack.ResourceVersion, sourceKey(s.src))
			return nil
		}
		if covers(current, ws) {
			// As good as applied: later resyncs take the cheaper check.
			s.r.applied.record(current, digest, s.stack.ResourceVersion, sourceKey(s.src))
			return nil
		}
	}
	err = s.r.Client.Patch(ctx, ws, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership)
	switch {
	case err == nil:
		if rec := s.stack.Status.Workspace; rec == nil || rec.UID != ws.UID {
			// The recorded Workspace was deleted since it was read, and
			// the apply made another, or landed on one made in its place.
			_, err := s.ownWorkspace(ctx, ws)
			return err
		}
		s.r.applied.record(ws, digest, s.stack.ResourceVersion, sourceKey(s.src))
		return nil
	case isNamespaceTerminating(err):
		return namespaceTerminating(err)
	case apierrors.IsForbidden(err):
		// A Workspace of someone else's, which the cache had not seen:
		// config/policy/operator-owned.yaml refuses to let the apply take
		// it.
		if taken := s.foreignWorkspace(ctx); taken != nil {
			return taken
		}
		return failed(pulumiv1.WorkspaceApplyFailedReason, "applying the Workspace", err)
	case apierrors.IsInvalid(err):
		// The API server (its schema or an admission policy) refuses the
		// Workspace built from this spec: retrying the same spec cannot
		// help, so it stalls at once, and is looked at again now and then
		// in case a policy changes.
		return sreconcile.NewStallingRequeue(pulumiv1.WorkspaceApplyFailedReason,
			fmt.Errorf("the Workspace built from the Stack's spec%s was rejected: %w", templateHint(s.stack), err), s.r.stallAfter())
	default:
		return failed(pulumiv1.WorkspaceApplyFailedReason, "applying the Workspace", err)
	}
}

// cachedWorkspace returns the Stack's Workspace as the cache holds it, nil
// when there is none, and waits while the previous one is being
// deleted (workspaceReclaimPolicy Delete, in this reconcile or an earlier
// one): applying it now would only touch the object on its way out, and an
// Update started on it would wait for a Workspace that never comes back.
// The deletion wakes the Stack, which owns the Workspace.
func (s *session) cachedWorkspace(ctx context.Context) (*autov1alpha1.Workspace, error) {
	waiting := sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason,
		errors.New("waiting for the previous Workspace to be deleted"), time.Second)
	if s.deletedWorkspace {
		return nil, waiting
	}
	var ws autov1alpha1.Workspace
	err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}, &ws)
	if err != nil {
		return nil, nil
	}
	if !ws.DeletionTimestamp.IsZero() {
		return nil, waiting
	}
	return &ws, nil
}

// foreignWorkspace reads the Stack's Workspace past the cache, and returns
// the stall of one the Stack did not make; nil otherwise.
func (s *session) foreignWorkspace(ctx context.Context) error {
	var ws autov1alpha1.Workspace
	if err := s.r.apiReader().Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}, &ws); err != nil {
		return nil
	}
	return s.ownOrTaken("workspace", &ws)
}

// createWorkspace creates ws, the Stack's Workspace, which the cache does
// not hold, and records it in status.workspace with the UID the API server
// gave it: the one record that tells the Workspace the Stack made from one
// made before it under its name. created is false when one exists already
// (the cache had not seen it yet): if ownWorkspace finds it is the Stack's,
// the caller applies it.
func (s *session) createWorkspace(ctx context.Context, ws *autov1alpha1.Workspace, digest string) (created bool, err error) {
	obj := ws.DeepCopy()
	err = s.r.Client.Create(ctx, obj, client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		s.recordWorkspace(obj)
		s.r.applied.record(obj, digest, s.stack.ResourceVersion, sourceKey(s.src))
		if err := s.applyOwnership(ctx, obj); err != nil {
			// The next apply hands the fields over (applyOwnership).
			log.FromContext(ctx).V(1).Info("handing the created Workspace's fields to the apply", "error", err.Error())
		}
		return true, nil
	case apierrors.IsAlreadyExists(err):
		var live autov1alpha1.Workspace
		if err := s.r.apiReader().Get(ctx, client.ObjectKeyFromObject(ws), &live); err != nil {
			return false, failed(pulumiv1.WorkspaceApplyFailedReason, "reading the Workspace", err)
		}
		_, err := s.ownWorkspace(ctx, &live)
		return false, err
	case isNamespaceTerminating(err):
		return false, namespaceTerminating(err)
	case apierrors.IsInvalid(err):
		return false, sreconcile.NewStallingRequeue(pulumiv1.WorkspaceApplyFailedReason,
			fmt.Errorf("the Workspace built from the Stack's spec%s was rejected: %w", templateHint(s.stack), err), s.r.stallAfter())
	default:
		return false, failed(pulumiv1.WorkspaceApplyFailedReason, "creating the Workspace", err)
	}
}

// applyOwnership hands the fields that the Stack's create of ws set to its
// server-side apply: a create is recorded as an update by FieldManager,
// and a field the apply no longer sets would otherwise stay, still owned
// by that update. Nothing is written when there is nothing to hand over.
func (s *session) applyOwnership(ctx context.Context, ws *autov1alpha1.Workspace) error {
	if !slices.ContainsFunc(ws.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == FieldManager && f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == ""
	}) {
		return nil
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(ws, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	err = s.r.Client.Patch(ctx, ws, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// Written since (the Workspace controller writes a new one at
		// once): the next reconcile, which that write wakes, hands over.
		return nil
	case err != nil:
		return failed(pulumiv1.WorkspaceApplyFailedReason, "handing the Workspace's fields to the apply", err)
	}
	return nil
}

// ownWorkspace decides whether ws, found under the name of the Stack's
// Workspace, is the one the Stack made: it is when status.workspace
// records its UID. One that names the Stack as its controller but is not
// recorded (a Stack from before stackyard recorded Workspaces, a reconcile
// killed between making it and recording it, or a Workspace made in its
// place) is deleted, to be made anew: its claim proves nothing (the
// admission policy that keeps it the operator's may not have been in force
// when it was made), and it would run with the Stack's credentials.
// deleted reports that, with the wait for the deletion as err. One that
// does not name the Stack is someone else's, which the Stack neither takes
// nor deletes (nameTaken).
func (s *session) ownWorkspace(ctx context.Context, ws *autov1alpha1.Workspace) (deleted bool, err error) {
	if rec := s.stack.Status.Workspace; rec != nil && rec.UID == ws.UID {
		return false, nil
	}
	if err := s.ownOrTaken("workspace", ws); err != nil {
		return false, err
	}
	if s.r.recordsDropped.Load() {
		return false, sreconcile.NewStallingRequeue(pulumiv1.StalledSpecInvalidReason, errors.New("status.workspace: the API server "+
			"does not keep this field, so no Workspace can be recorded: the Stack CRD is older than the operator; apply the CRDs of its release"),
			nameTakenRecheck)
	}
	s.warn("WorkspaceUnproven", fmt.Sprintf("workspace %s names this Stack as its controller, but status.workspace has no record of it "+
		"(UID %s): deleting it, to make the Stack's anew", ws.Name, ws.UID))
	s.r.applied.forget(ws.Namespace, ws.Name)
	if err := s.r.Client.Delete(ctx, ws, client.Preconditions{UID: &ws.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return false, failed(pulumiv1.WorkspaceDeleteFailedReason, "deleting an unrecorded Workspace", err)
	}
	s.deletedWorkspace = true
	return true, sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason,
		fmt.Errorf("waiting for workspace %s, which this Stack has no record of making, to be deleted", ws.Name), time.Second)
}

// recordWorkspace records ws as the Workspace the Stack made.
func (s *session) recordWorkspace(ws *autov1alpha1.Workspace) {
	s.stack.Status.Workspace = &shared.ObjectRecord{Name: ws.Name, UID: ws.UID}
}

// ownOrTaken is nil when the Stack controls obj (a kind of it), and the
// stall of nameTaken otherwise.
func (s *session) ownOrTaken(kind string, obj metav1.Object) error {
	if metav1.IsControlledBy(obj, s.stack) {
		return nil
	}
	return nameTaken(kind, obj)
}

// nameTaken is the stall of a Stack whose Workspace (kind) has a name that
// obj, which the Stack did not make, holds. The name is the Stack's own
// (as upstream), and anyone allowed to create Workspaces may make one of
// that name. Taken for the Stack's own, a Workspace would keep the fields
// its maker set (an image, a pod template) and run them with the Stack's
// credentials; so the Stack waits until obj is deleted
// (config/policy/operator-owned.yaml refuses the operator the claim as
// well). Updates are not named in advance (BuildUpdate).
func nameTaken(kind string, obj metav1.Object) error {
	return sreconcile.NewStallingRequeue(pulumiv1.StalledNameTakenReason,
		fmt.Errorf("%s %s exists and was not made by this Stack (%s): the Stack does not take another's %s for its own; delete it to go on",
			kind, obj.GetName(), controlledBy(obj), kind), nameTakenRecheck)
}

// nameTakenRecheck is how often a Stack whose Workspace's name is taken
// looks again: the object that took it is not the
// Stack's, so its deletion does not wake the Stack.
const nameTakenRecheck = 15 * time.Second

// controlledBy says what controls obj, for messages.
func controlledBy(obj metav1.Object) string {
	if c := metav1.GetControllerOf(obj); c != nil {
		return fmt.Sprintf("its controller is %s %s", c.Kind, c.Name)
	}
	return "it has no controller"
}

// templateHint points at spec.workspaceTemplate when the Stack has one: it
// is where most fields of the Workspace come from unchanged.
func templateHint(stack *pulumiv1.Stack) string {
	if stack.Spec.WorkspaceTemplate != nil {
		return " (and its spec.workspaceTemplate)"
	}
	return ""
}

// reclaimWorkspace reports whether the Stack's Workspace is deleted once
// the Stack is synced (workspaceReclaimPolicy Delete).
func reclaimWorkspace(stack *pulumiv1.Stack) bool {
	return stack.Spec.WorkspaceReclaimPolicy == shared.WorkspaceReclaimDelete
}

// deleteWorkspace removes the Stack's Workspace (its agent and state go
// with it); a later update makes a new one. It asks the cache first, so
// that a Stack whose Workspace is already gone costs no API call. A
// Workspace of that name that the Stack did not make is not its to delete.
func (s *session) deleteWorkspace(ctx context.Context) error {
	ws := &autov1alpha1.Workspace{}
	key := client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}
	s.r.applied.forget(key.Namespace, key.Name)
	err := s.r.Client.Get(ctx, key, ws)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(ws, s.stack)) {
		return nil
	}
	ws.Name, ws.Namespace = key.Name, key.Namespace
	if err := s.r.Client.Delete(ctx, ws); client.IgnoreNotFound(err) != nil {
		return failed(pulumiv1.WorkspaceDeleteFailedReason, "deleting the Workspace", err)
	}
	s.deletedWorkspace = true
	return nil
}

// reference is a Secret or ConfigMap key the spec names, and the field
// that names it.
type reference struct {
	field, kind, name, key string
}

// references lists the Secret and ConfigMap keys the Workspace will read
// where the agent runs (key "" for a whole object, as envs and secretEnvs
// take it), in the order of the spec's fields.
func references(spec *shared.StackSpec) []reference {
	var refs []reference
	if spec.AccessTokenSecret != "" {
		refs = append(refs, reference{"spec.accessTokenSecret", "Secret", spec.AccessTokenSecret, stackrun.AccessTokenKey})
	}
	for i, name := range spec.Envs {
		refs = append(refs, reference{fmt.Sprintf("spec.envs[%d]", i), "ConfigMap", name, ""})
	}
	for i, name := range spec.SecretEnvs {
		refs = append(refs, reference{fmt.Sprintf("spec.envSecrets[%d]", i), "Secret", name, ""})
	}
	for _, name := range slices.Sorted(maps.Keys(spec.EnvRefs)) {
		if ref := spec.EnvRefs[name]; ref.SelectorType == shared.ResourceSelectorSecret && ref.SecretRef != nil {
			refs = append(refs, reference{fmt.Sprintf("spec.envRefs[%s].secret", name), "Secret", ref.SecretRef.Name, ref.SecretRef.Key})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(spec.ConfigRef)) {
		ref := spec.ConfigRef[key]
		refs = append(refs, reference{fmt.Sprintf("spec.configRef[%s]", key), "ConfigMap", ref.Name, ref.Key})
	}
	for _, key := range slices.Sorted(maps.Keys(spec.SecretRefs)) {
		if ref := spec.SecretRefs[key]; ref.SelectorType == shared.ResourceSelectorSecret && ref.SecretRef != nil {
			refs = append(refs, reference{fmt.Sprintf("spec.secretsRef[%s].secret", key), "Secret", ref.SecretRef.Name, ref.SecretRef.Key})
		}
	}
	return refs
}

// checkReferences returns a bounded wait naming the first field whose
// Secret, ConfigMap or key does not exist: it is usually created alongside
// the Stack, and if it never is the Stack stalls naming it. Each object is
// read once per reconcile, one at a time (Secrets are never cached).
func (s *session) checkReferences(ctx context.Context) error {
	type object struct{ kind, name string }
	keys := map[object]map[string]struct{}{}
	for _, ref := range references(&s.stack.Spec) {
		obj := object{ref.kind, ref.name}
		data, seen := keys[obj]
		if !seen {
			var err error
			if data, err = s.readData(ctx, ref.kind, ref.name); err != nil {
				return fmt.Errorf("%s: %w", ref.field, err)
			}
			keys[obj] = data
		}
		if data == nil {
			return sreconcile.NewMissing(pulumiv1.ReferenceNotFoundReason, fmt.Errorf("%s: %s %q not found", ref.field, ref.kind, ref.name))
		}
		if _, ok := data[ref.key]; ref.key != "" && !ok {
			return sreconcile.NewMissing(pulumiv1.ReferenceNotFoundReason, fmt.Errorf("%s: %s %q has no key %q", ref.field, ref.kind, ref.name, ref.key))
		}
	}
	return nil
}

// readData returns the set of keys of a Secret or ConfigMap of the
// Stack's namespace (no values), or nil when it does not exist.
func (s *session) readData(ctx context.Context, kind, name string) (map[string]struct{}, error) {
	key := client.ObjectKey{Namespace: s.stack.Namespace, Name: name}
	var err error
	data := map[string]struct{}{}
	if kind == "Secret" {
		var sec corev1.Secret
		if err = s.r.Client.Get(ctx, key, &sec); err == nil {
			for k := range sec.Data {
				data[k] = struct{}{}
			}
		}
	} else {
		var cm corev1.ConfigMap
		if err = s.r.Client.Get(ctx, key, &cm); err == nil {
			for k := range cm.Data {
				data[k] = struct{}{}
			}
			for k := range cm.BinaryData {
				data[k] = struct{}{}
			}
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, failed(pulumiv1.SecretReadFailedReason, fmt.Sprintf("reading %s %q", kind, name), err)
	}
	return data, nil
}
