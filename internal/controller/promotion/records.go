package promotion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// A promotion keeps each Stack's preview in a StackPromotion of its own
// (change.StackPromotionName), so that its own status stays small at a
// thousand Stacks.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=stackpromotions,verbs=get;list;watch;create;update;delete

// records are the promotion's StackPromotions as a reconcile read them
// (from the cache, at its start), and the previews its steps work on.
// finish stores what changed, before the Promotion's status, so that the
// status never counts a preview whose record was not stored.
type records struct {
	// loaded are the records read, by Stack name: copies, compared with
	// previews when they are stored.
	loaded map[string]*promotionv1alpha1.StackPromotion
	// previews are the previews the steps read and write (the records'
	// previews at first, by Stack name).
	previews []promotionv1alpha1.StackPreview
	// whole says previews are all the promotion's previews: the record
	// of a Stack not among them (one the stage no longer deploys) is
	// deleted when they are stored.
	whole bool
}

// loadRecords reads the promotion's records from the cache while it is
// Pending: its previews run, and its gates and its start read them. A
// running promotion reads one Stack's record when it pins the Stack
// (pinOf); a finished one none.
func (s *session) loadRecords(ctx context.Context) error {
	if !s.pending() {
		return nil
	}
	recs, err := change.StackRecords(ctx, s.r.Client, s.p)
	if err != nil {
		return err
	}
	s.recs.loaded = make(map[string]*promotionv1alpha1.StackPromotion, len(recs))
	if len(recs) == 0 && len(s.p.Status.Previews) > 0 {
		// A promotion made before StackPromotions: its previews move
		// into them (stored before the status that drops them).
		s.recs.previews, s.p.Status.Previews = s.p.Status.Previews, nil
		return nil
	}
	for i := range recs {
		rec := &recs[i]
		s.recs.loaded[rec.Stack] = rec
		if rec.Preview != nil {
			s.recs.previews = append(s.recs.previews, *rec.Preview.DeepCopy())
		}
	}
	slices.SortFunc(s.recs.previews, func(a, b promotionv1alpha1.StackPreview) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// errRecordStale says a record in hand was older than the one stored (a
// create found it existing, an update conflicted).
var errRecordStale = errors.New("a record read from the cache is older than the one stored")

// storeRecords creates or updates the record of each preview that
// changed, and deletes those whole previews leave out. An update is made
// over the resourceVersion read, so a reconcile that read a record older
// than the one stored writes nothing of it (errRecordStale).
func (s *session) storeRecords(ctx context.Context) error {
	if s.recs.loaded == nil {
		return nil
	}
	seen := make(map[string]bool, len(s.recs.previews))
	for i := range s.recs.previews {
		pv := &s.recs.previews[i]
		seen[pv.Name] = true
		rec, found := s.recs.loaded[pv.Name]
		switch {
		case !found && equality.Semantic.DeepEqual(*pv, promotionv1alpha1.StackPreview{Name: pv.Name}):
			// Not started (waiting its turn, or for the Stack): nothing
			// to record yet.
		case !found:
			rec = change.NewStackPromotion(s.p, pv.Name)
			rec.Preview = pv.DeepCopy()
			if err := s.r.Client.Create(ctx, rec); apierrors.IsAlreadyExists(err) {
				return s.taken(ctx, rec)
			} else if err != nil {
				return recordError("creating", pv.Name, err)
			}
		case !equality.Semantic.DeepEqual(rec.Preview, pv):
			rec = rec.DeepCopy()
			rec.Preview = pv.DeepCopy()
			if err := s.r.Client.Update(ctx, rec); err != nil {
				return recordError("updating", pv.Name, err)
			}
		}
	}
	if !s.recs.whole {
		return nil
	}
	for name, rec := range s.recs.loaded {
		if seen[name] {
			continue
		}
		// The Stack left the stage: as this copy of the promotion says,
		// which must be the one stored (a stale one may still be Pending
		// when the promotion runs).
		if current, err := s.isCurrent(ctx); err != nil {
			return sreconcile.NewGeneric("", err)
		} else if !current {
			return errRecordStale
		}
		uid, version := rec.UID, rec.ResourceVersion
		if err := s.r.Client.Delete(ctx, rec, client.Preconditions{UID: &uid, ResourceVersion: &version}); err != nil && !apierrors.IsNotFound(err) {
			return recordError("deleting", name, err)
		}
	}
	return nil
}

// recordTaken is the error of a record whose name an object that is not
// the promotion's record holds: the promotion fails, naming it.
type recordTaken struct{ name, stack string }

func (e *recordTaken) Error() string {
	return fmt.Sprintf("StackPromotion %s, where the promotion records Stack %s, exists and is not its record (it is not controlled by this promotion): "+
		"delete it and promote again", e.name, e.stack)
}

// taken tells why rec could not be created: the record exists already
// and the cache is behind, or is gone since (errRecordStale either way),
// or its name is held by another object (liveRecord's errors).
func (s *session) taken(ctx context.Context, rec *promotionv1alpha1.StackPromotion) error {
	if _, err := s.liveRecord(ctx, rec.Stack); err != nil {
		return err
	}
	return errRecordStale
}

// liveRecord reads, live, the object under the name of the record of the
// Stack name: nil when there is none; errPredecessor when it is an
// earlier promotion's of the same name, or being deleted; recordTaken
// when it is anyone else's.
func (s *session) liveRecord(ctx context.Context, name string) (*promotionv1alpha1.StackPromotion, error) {
	live := &promotionv1alpha1.StackPromotion{}
	key := client.ObjectKey{Namespace: s.p.Namespace, Name: change.StackPromotionName(s.p.Name, name)}
	switch err := s.r.APIReader.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, sreconcile.NewGeneric("", fmt.Errorf("reading the record of Stack %s (a StackPromotion): %w", name, err))
	case predecessors(live, s.p):
		return nil, errPredecessor
	case !change.IsRecordOf(live, s.p, name):
		return nil, &recordTaken{name: key.Name, stack: name}
	}
	return live, nil
}

// errPredecessor says the record's name is held by the record of an
// earlier promotion of the same name, which Kubernetes' garbage collector
// deletes now that its promotion is gone.
var errPredecessor = sreconcile.NewWaiting("", errors.New("the record of an earlier promotion of this name is still there; "+
	"waiting for Kubernetes' garbage collector to delete it"), cacheLag)

// predecessors reports whether rec is the record of another promotion of
// p's name (an earlier one, deleted: another UID), or is being deleted.
func predecessors(rec *promotionv1alpha1.StackPromotion, p *promotionv1alpha1.Promotion) bool {
	if !rec.DeletionTimestamp.IsZero() {
		return true
	}
	owner := metav1.GetControllerOf(rec)
	return owner != nil && owner.Kind == "Promotion" && owner.APIVersion == promotionv1alpha1.GroupVersion.String() &&
		owner.Name == p.Name && owner.UID != p.UID
}

// recordError maps a failed write of the record of the Stack name: one
// that finds the record changed is errRecordStale.
func recordError(verb, name string, err error) error {
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		return errRecordStale
	}
	return sreconcile.NewGeneric("", fmt.Errorf("%s the record of Stack %s (a StackPromotion): %w", verb, name, err))
}

// countPreviews sets status.previewed and status.previewing from the
// previews in hand.
func (s *session) countPreviews() {
	if s.recs.loaded == nil {
		return
	}
	var done, running int32
	for _, pv := range s.recs.previews {
		switch {
		case pv.Summary != nil:
			done++
		case pv.Update != "":
			running++
		}
	}
	s.p.Status.Previewed, s.p.Status.Previewing = done, running
}

// recordedPreview is the preview recorded of the Stack name, or a new
// one.
func (s *session) recordedPreview(name string) promotionv1alpha1.StackPreview {
	if i := slices.IndexFunc(s.recs.previews, func(pv promotionv1alpha1.StackPreview) bool { return pv.Name == name }); i >= 0 {
		return s.recs.previews[i]
	}
	return promotionv1alpha1.StackPreview{Name: name}
}

// recordOf is the record of the Stack name as it will be stored: the one
// loaded, or a new one not created yet (no resourceVersion).
func (s *session) recordOf(name string) *promotionv1alpha1.StackPromotion {
	if rec, ok := s.recs.loaded[name]; ok {
		return rec
	}
	return change.NewStackPromotion(s.p, name)
}

// recordCurrent reports whether the record of the Stack name in hand is
// the one stored, read live: a preview makes objects whose UIDs only that
// record holds, so a reconcile holding an older one must make nothing. An
// object under the record's name that is not the promotion's record is
// recordTaken.
func (s *session) recordCurrent(ctx context.Context, name string) (bool, error) {
	live, err := s.liveRecord(ctx, name)
	switch {
	case err != nil:
		return false, err
	case live == nil:
		return s.recordOf(name).ResourceVersion == "", nil
	}
	return live.ResourceVersion == s.recordOf(name).ResourceVersion, nil
}
