package change

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// maxRecordPrefix bounds the readable part of a StackPromotion's name,
// which ends in a digest of the promotion's and the Stack's names.
const maxRecordPrefix = 200

// StackPromotionName is the name of the StackPromotion in which the
// promotion promotionName records its part on the Stack stackName:
// "<promotion>-<stack>" cut at 200 characters, then a digest of both
// names, so that no two pairs share a name (the promotion "a-b" with the
// Stack "c" and the promotion "a" with the Stack "b-c" do not).
func StackPromotionName(promotionName, stackName string) string {
	sum := sha256.Sum256([]byte(promotionName + "\x00" + stackName))
	prefix := promotionName + "-" + stackName
	prefix = strings.TrimRight(prefix[:min(len(prefix), maxRecordPrefix)], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:10]
}

// NewStackPromotion is the StackPromotion promotion p makes for the
// Stack stackName: named StackPromotionName, naming both and controlled
// by p, with nothing recorded yet.
func NewStackPromotion(p *promotionv1alpha1.Promotion, stackName string) *promotionv1alpha1.StackPromotion {
	yes := true
	return &promotionv1alpha1.StackPromotion{
		ObjectMeta: metav1.ObjectMeta{
			// No labels: a name of up to 253 characters is no label
			// value. The field promotion (RecordPromotionIndex) finds them.
			Namespace: p.Namespace, Name: StackPromotionName(p.Name, stackName),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: promotionv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: p.Name, UID: p.UID,
				Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Promotion: p.Name, Stack: stackName,
	}
}

// IsRecordOf reports whether rec is the record promotion p keeps of the
// Stack stackName: controlled by p's UID, and naming both. The names and
// labels alone are claims anyone who may create the object could make;
// the controller reference with p's UID is what only the operator sets
// (the admission policy stackyard-records).
func IsRecordOf(rec *promotionv1alpha1.StackPromotion, p *promotionv1alpha1.Promotion, stackName string) bool {
	return metav1.IsControlledBy(rec, p) && rec.Promotion == p.Name && rec.Stack == stackName &&
		rec.Name == StackPromotionName(p.Name, stackName)
}

// StackRecord reads, through r, the StackPromotion in which promotion p
// records its part on the Stack stackName; nil when there is none, or
// when the object under its name is not p's record (IsRecordOf).
func StackRecord(ctx context.Context, r client.Reader, p *promotionv1alpha1.Promotion, stackName string) (*promotionv1alpha1.StackPromotion, error) {
	rec := &promotionv1alpha1.StackPromotion{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: StackPromotionName(p.Name, stackName)}, rec); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the record of promotion %s on Stack %s: %w", p.Name, stackName, err)
	}
	if !IsRecordOf(rec, p, stackName) {
		return nil, nil
	}
	return rec, nil
}

// StackRecords lists, through r, the StackPromotions that name promotion
// p (a field selector: through a cache, r must hold RecordPromotionIndex,
// SetupIndexes), and returns those that are its records (IsRecordOf), in
// no particular order.
func StackRecords(ctx context.Context, r client.Reader, p *promotionv1alpha1.Promotion) ([]promotionv1alpha1.StackPromotion, error) {
	var list promotionv1alpha1.StackPromotionList
	if err := r.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingFields{RecordPromotionIndex: p.Name}); err != nil {
		return nil, fmt.Errorf("listing the records of promotion %s: %w", p.Name, err)
	}
	out := list.Items[:0]
	for i := range list.Items {
		if IsRecordOf(&list.Items[i], p, list.Items[i].Stack) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// Previews are the previews recorded in recs, in the order of p's
// rollout (status.stacks) where it has one, by Stack name otherwise; for
// a promotion made before StackPromotions, with none, those its status
// kept (the deprecated status.previews).
func Previews(p *promotionv1alpha1.Promotion, recs []promotionv1alpha1.StackPromotion) []promotionv1alpha1.StackPreview {
	place := make(map[string]int, len(p.Status.Stacks))
	for i, ps := range p.Status.Stacks {
		place[ps.Name] = i
	}
	out := make([]promotionv1alpha1.StackPreview, 0, len(recs))
	for i := range recs {
		if recs[i].Preview != nil {
			out = append(out, *recs[i].Preview)
		}
	}
	if len(recs) == 0 {
		out = append(out, p.Status.Previews...)
	}
	slices.SortStableFunc(out, func(a, b promotionv1alpha1.StackPreview) int {
		pa, oka := place[a.Name]
		pb, okb := place[b.Name]
		switch {
		case oka && okb:
			return pa - pb
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
