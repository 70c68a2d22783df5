package pipeline

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Limits of the Release's spec.commit fields, as the CRD sets them.
const (
	maxSubjectLength = 1024
	maxMessageLength = 4096
	maxAuthorLength  = 512
)

// shaLength is how many hex digits of the commit a Release's name carries.
const shaLength = 10

// ReleaseName is the name of pipeline's Release of commit sha:
// "<pipeline>-<first 10 hex digits>". A commit is one Release, however
// many tags it has.
func ReleaseName(pipeline, sha string) string {
	return pipeline + "-" + sha[:min(len(sha), shaLength)]
}

// createReleases records each new version as a Release, oldest first: a
// reconcile stopped halfway leaves the newest existing release below the
// versions still to record, so the next discovery finds them again.
// Creating is idempotent: a Release that exists already is left as it is.
// Each Release created is announced by a ReleaseDiscovered event.
func (r *Reconciler) createReleases(ctx context.Context, s *session) (sreconcile.Result, error) {
	p := s.pipeline
	for i := len(s.found) - 1; i >= 0; i-- {
		rel, err := r.newRelease(p, s.found[i])
		if err != nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReleaseCreateFailedReason, err)
		}
		if err := r.Client.Create(ctx, rel); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReleaseCreateFailedReason,
				fmt.Errorf("creating Release %q: %w", rel.Name, err))
		}
		s.releases = append(s.releases, *rel)
		c := rel.Spec.Commit
		r.Recorder.Eventf(p, rel, corev1.EventTypeNormal, promotionv1alpha1.EventReleaseDiscovered, "Discover",
			"release %s: %s %s", rel.Name, describeVersion(c), c.Subject)
		log.FromContext(ctx).V(1).Info("recorded a release", "release", rel.Name, "commit", c.SHA, "tag", c.Tag)
	}
	p.Status.LatestRelease = latestRelease(s)
	return sreconcile.ResultSuccess, nil
}

// latestRelease is the name of the Pipeline's newest Release: the newest
// version found now, else the one status named if it still exists, else
// the newest that exists.
func latestRelease(s *session) string {
	if len(s.found) > 0 {
		return ReleaseName(s.pipeline.Name, s.found[0].commit.SHA)
	}
	for _, rel := range s.releases {
		if rel.Name == s.pipeline.Status.LatestRelease {
			return rel.Name
		}
	}
	if i := s.sel.newest(s.releases); i >= 0 {
		return s.releases[i].Name
	}
	return ""
}

// describeVersion is how an event names a release's version: its tag and
// short commit, or its branch and short commit.
func describeVersion(c promotionv1alpha1.ReleaseCommit) string {
	short := c.SHA[:min(len(c.SHA), shaLength)]
	if c.Tag != "" {
		return fmt.Sprintf("tag %s (%s)", c.Tag, short)
	}
	return fmt.Sprintf("%s@%s", c.Branch, short)
}

// newRelease builds the Release of c, owned by p so that it goes when p
// goes, and labelled with p's name so that p's Releases can be listed.
func (r *Reconciler) newRelease(p *promotionv1alpha1.Pipeline, c candidate) (*promotionv1alpha1.Release, error) {
	rel := &promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace,
			Name:      ReleaseName(p.Name, c.commit.SHA),
			Labels:    map[string]string{promotionv1alpha1.PipelineLabel: p.Name},
		},
		Spec: promotionv1alpha1.ReleaseSpec{
			Pipeline: p.Name,
			Commit: promotionv1alpha1.ReleaseCommit{
				SHA:     c.commit.SHA,
				Tag:     c.tag,
				Branch:  c.branch,
				Subject: truncate(c.commit.Subject, maxSubjectLength),
				Message: truncate(c.commit.Message, maxMessageLength),
				Author:  truncate(c.commit.Author, maxAuthorLength),
			},
		},
	}
	if !c.commit.Time.IsZero() {
		t := metav1.NewTime(c.commit.Time.UTC().Truncate(time.Second))
		rel.Spec.Commit.Time = &t
	}
	if err := controllerutil.SetControllerReference(p, rel, r.Scheme); err != nil {
		return nil, fmt.Errorf("owning Release %q: %w", rel.Name, err)
	}
	return rel, nil
}

// truncate cuts s to at most n bytes (and so at most n characters), at a
// character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
