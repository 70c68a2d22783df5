package pipeline

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// discoverReleases lists the Pipeline's Releases and finds the versions of
// the repository that are newer than all of them, newest first, at most
// spec.git.discoveryLimit: new heads of the branch, or new tags. It asks
// git only for what it cannot know otherwise: a branch whose head is
// already a release costs no fetch, and commits described once are
// remembered by the poller.
func (r *Reconciler) discoverReleases(ctx context.Context, s *session) (sreconcile.Result, error) {
	var releases promotionv1alpha1.ReleaseList
	if err := r.Client.List(ctx, &releases, client.InNamespace(s.pipeline.Namespace),
		client.MatchingLabels{promotionv1alpha1.PipelineLabel: s.pipeline.Name}); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReleaseListFailedReason, fmt.Errorf("listing the Releases: %w", err))
	}
	s.releases = slices.DeleteFunc(releases.Items, func(rel promotionv1alpha1.Release) bool {
		return rel.Spec.Pipeline != s.pipeline.Name
	})
	var err error
	if s.sel.usesTags() {
		s.found, err = r.discoverTags(ctx, s)
	} else {
		s.found, err = r.discoverCommits(ctx, s)
	}
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	now := metav1.NewTime(r.now().UTC().Truncate(time.Second))
	s.pipeline.Status.LastDiscoveryTime = &now
	return sreconcile.ResultSuccess, nil
}

// discoverCommits returns the commits on the branch above the newest that
// is already a release, that the path filters admit.
func (r *Reconciler) discoverCommits(ctx context.Context, s *session) ([]candidate, error) {
	git := &s.pipeline.Spec.Git
	head, err := source.HeadOf(s.refs, git.Branch)
	if err != nil {
		return nil, sourceError(err, s.interval)
	}
	known := s.knownCommits()
	if known[head.Commit] {
		return nil, nil
	}
	history, err := r.Poller.History(ctx, git.RepoURL, head, s.auth, s.sel.limit)
	if err != nil {
		return nil, sourceError(err, s.interval)
	}
	return s.sel.branchCandidates(history, func(sha string) bool { return known[sha] }, head.Short()), nil
}

// discoverTags returns the tags the strategy ranks above the newest
// existing release, among the spec.git.discoveryLimit newest, described.
// NewestTag ranks by commit time, so it describes every tag (once: the
// poller remembers); the others rank by name and describe only the new.
func (r *Reconciler) discoverTags(ctx context.Context, s *session) ([]candidate, error) {
	url := s.pipeline.Spec.Git.RepoURL
	tags := source.Tags(s.refs)
	var times map[string]time.Time
	if s.sel.strategy == promotionv1alpha1.NewestTag {
		described, err := r.Poller.Describe(ctx, url, tags, s.auth)
		if err != nil {
			return nil, sourceError(err, s.interval)
		}
		times = make(map[string]time.Time, len(described))
		for sha, c := range described {
			times[sha] = c.Time
		}
		tags = slices.DeleteFunc(tags, func(t source.Ref) bool { _, ok := times[t.Commit]; return !ok })
	}
	var newest *version
	if i := s.sel.newest(s.releases); i >= 0 {
		v, _ := s.sel.versionOf(s.releases[i].Spec.Commit.Tag, commitTime(&s.releases[i]))
		newest = &v
	}
	known := s.knownCommits()
	found := slices.DeleteFunc(s.sel.newerThan(s.sel.orderTags(tags, times), newest), func(c candidate) bool {
		return known[c.commit.SHA]
	})
	if len(found) == 0 {
		return nil, nil
	}
	refs := make([]source.Ref, len(found))
	for i, c := range found {
		refs[i] = source.Ref{Name: "refs/tags/" + c.tag, Commit: c.commit.SHA}
	}
	described, err := r.Poller.Describe(ctx, url, refs, s.auth)
	if err != nil {
		return nil, sourceError(err, s.interval)
	}
	out := found[:0]
	for _, c := range found {
		if d, ok := described[c.commit.SHA]; ok {
			c.commit = d
			out = append(out, c)
		}
	}
	return out, nil
}

// knownCommits returns the commits that are releases already.
func (s *session) knownCommits() map[string]bool {
	known := make(map[string]bool, len(s.releases))
	for _, rel := range s.releases {
		known[rel.Spec.Commit.SHA] = true
	}
	return known
}

// commitTime returns a release's commit time, zero when it has none.
func commitTime(rel *promotionv1alpha1.Release) time.Time {
	if rel.Spec.Commit.Time == nil {
		return time.Time{}
	}
	return rel.Spec.Commit.Time.Time
}
