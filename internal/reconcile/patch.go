package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchedMetadata are the metadata fields a controller may change on the
// object it reconciles; everything else in metadata belongs to the API
// server, and the spec belongs to the user, so the Patcher never writes them.
var patchedMetadata = []string{"labels", "annotations", "finalizers", "ownerReferences"}

// Patcher writes a reconciled object's changes back once, at the end of
// Reconcile: status through the status subresource, and the metadata a
// controller owns (labels, annotations, finalizers, owner references) through
// the object, each only when it changed. Create it right after reading the
// object and call Patch in a defer, so that status is written whatever path
// the reconcile took.
//
// Both patches are JSON merge patches of just the changed fields, so they do
// not overwrite what others changed meanwhile. A metadata patch that changes
// finalizers or owner references carries the object's resourceVersion: lists
// are replaced whole by a merge patch, so a concurrent change makes it fail
// with a conflict (and the reconcile retry) instead of losing the other
// writer's entry. A Locked Patcher makes every patch carry it.
type Patcher struct {
	client client.Client
	before client.Object
	lock   bool
	gone   bool
	// versions are the resourceVersions the object had: the snapshot's,
	// then each successful patch's answer.
	versions []string
}

// NewPatcher snapshots obj (a deep copy) as the base of the later patches.
func NewPatcher(c client.Client, obj client.Object) *Patcher {
	return &Patcher{client: c, before: obj.DeepCopyObject().(client.Object), versions: []string{obj.GetResourceVersion()}}
}

// Versions are the resourceVersions the object has had since the snapshot,
// oldest first: the snapshot's, then the answer to each patch sent (a
// metadata and a status patch are two). A copy at any but the last is
// older than what this Patcher wrote (Writes).
func (p *Patcher) Versions() []string { return p.versions }

// Locked makes every patch of p carry the resourceVersion its decisions
// were made on (obj's, then each patch's answer), so that a patch
// of an object read from a cache that was behind fails with a conflict
// instead of writing over what the cache did not show yet. A controller
// whose decisions must see the latest status (start an operation, declare
// one interrupted) uses it instead of reading every object live. It
// returns p.
func (p *Patcher) Locked() *Patcher {
	p.lock = true
	return p
}

// Gone reports whether the last Patch found the object deleted.
func (p *Patcher) Gone() bool { return p.gone }

// Patch writes what changed in obj since the snapshot: metadata first (so a
// finalizer is recorded before anything relies on it), then status. A
// NotFound from either means the object was deleted meanwhile (typically
// because the patch removed its last finalizer) and is not an error: Gone
// reports it. obj is
// updated from the API server's answer, and becomes the snapshot for a later
// Patch, so Patch may be called more than once.
func (p *Patcher) Patch(ctx context.Context, obj client.Object) error {
	// Most reconciles change nothing. Comparing the typed objects is a
	// fraction of the cost of converting both to compute an empty diff,
	// and never finds equal what the conversion would find different.
	if reflect.DeepEqual(p.before, obj) {
		return nil
	}
	before, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.before)
	if err != nil {
		return fmt.Errorf("converting the snapshot of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	after, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	metaDiff := mergeDiff(pick(before["metadata"], patchedMetadata), pick(after["metadata"], patchedMetadata))
	statusDiff := mergeDiff(pick(before, []string{"status"}), pick(after, []string{"status"}))

	var errs []error
	version := obj.GetResourceVersion()
	if len(metaDiff) > 0 {
		_, lists := metaDiff["finalizers"]
		if _, owners := metaDiff["ownerReferences"]; owners || lists || p.lock {
			metaDiff["resourceVersion"] = version
		}
		// Patch a copy when status follows, so that the answer (which
		// carries the old status) does not overwrite obj's new status.
		target := obj
		if len(statusDiff) > 0 {
			target = obj.DeepCopyObject().(client.Object)
		}
		err := p.send(ctx, target, map[string]any{"metadata": metaDiff}, false)
		switch {
		case apierrors.IsNotFound(err):
			p.gone = true
			return nil
		case err != nil:
			errs = append(errs, fmt.Errorf("patching metadata of %s: %w", client.ObjectKeyFromObject(obj), err))
		default:
			version = target.GetResourceVersion()
			p.versions = append(p.versions, version)
		}
	}
	if len(statusDiff) > 0 {
		if p.lock {
			statusDiff["metadata"] = map[string]any{"resourceVersion": version}
		}
		err := p.send(ctx, obj, statusDiff, true)
		switch {
		case apierrors.IsNotFound(err):
			p.gone = true
			return nil
		case err != nil:
			errs = append(errs, fmt.Errorf("patching status of %s: %w", client.ObjectKeyFromObject(obj), err))
		default:
			p.versions = append(p.versions, obj.GetResourceVersion())
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	p.before = obj.DeepCopyObject().(client.Object)
	return nil
}

// send applies a JSON merge patch to obj, or to its status subresource.
func (p *Patcher) send(ctx context.Context, obj client.Object, patch map[string]any, status bool) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	raw := client.RawPatch(types.MergePatchType, data)
	if status {
		return p.client.Status().Patch(ctx, obj, raw)
	}
	return p.client.Patch(ctx, obj, raw)
}

// pick returns the entries of m (a JSON object, or anything else read as
// empty) whose keys are listed.
func pick(m any, keys []string) map[string]any {
	obj, _ := m.(map[string]any)
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := obj[k]; ok {
			out[k] = v
		}
	}
	return out
}

// mergeDiff returns the JSON merge patch (RFC 7386) that turns old into
// new: changed and added keys with their new value, nested objects as their
// own diff, removed keys as null. Arrays are replaced whole, as merge patches
// require. It returns an empty map when nothing changed.
func mergeDiff(old, new map[string]any) map[string]any {
	diff := map[string]any{}
	for k := range old {
		if _, ok := new[k]; !ok {
			diff[k] = nil
		}
	}
	for k, nv := range new {
		ov, existed := old[k]
		if existed && reflect.DeepEqual(ov, nv) {
			continue
		}
		om, oldIsObject := ov.(map[string]any)
		nm, newIsObject := nv.(map[string]any)
		if existed && oldIsObject && newIsObject {
			if sub := mergeDiff(om, nm); len(sub) > 0 {
				diff[k] = sub
			}
			continue
		}
		diff[k] = nv
	}
	return diff
}
