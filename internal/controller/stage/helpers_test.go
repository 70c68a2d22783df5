package stage

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

// release is a Release committed at t0+commit, verified in the stages
// listed in verified (stage → since, as an offset from t0).
func release(name string, commit time.Duration, verified map[string]time.Duration) promotionv1alpha1.Release {
	r := promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(commit)},
		Spec:       promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{SHA: name, Time: ptr(at(commit))}},
	}
	for stage, since := range verified {
		if r.Status.VerifiedIn == nil {
			r.Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{}
		}
		r.Status.VerifiedIn[stage] = promotionv1alpha1.ReleaseInStage{Since: at(since)}
	}
	return r
}

func ptr[T any](v T) *T { return &v }
