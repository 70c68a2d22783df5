package pipeline

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/source"
)

// DefaultDiscoveryLimit is spec.git.discoveryLimit when it is unset.
const DefaultDiscoveryLimit = 20

// maxTagLength is the longest tag a Release can record
// (spec.commit.tag); longer tags are not candidates.
const maxTagLength = 255

// selection is what a Pipeline's spec.git says about which commits become
// releases, parsed once per reconcile. Everything in this file is pure, so
// that each rule is a table test.
type selection struct {
	strategy   promotionv1alpha1.CommitSelectionStrategy
	constraint *semver.Constraints
	include    []string
	exclude    []string
	limit      int
}

// newSelection reads spec. An invalid semverConstraint is the one mistake
// the CRD schema cannot catch; the error names the field.
func newSelection(spec *promotionv1alpha1.GitSubscription) (selection, error) {
	s := selection{
		strategy: cmp.Or(spec.CommitSelectionStrategy, promotionv1alpha1.NewestFromBranch),
		include:  spec.IncludePaths,
		exclude:  spec.ExcludePaths,
		limit:    int(spec.DiscoveryLimit),
	}
	if s.limit <= 0 {
		s.limit = DefaultDiscoveryLimit
	}
	if s.strategy == promotionv1alpha1.SemVer && spec.SemverConstraint != "" {
		c, err := semver.NewConstraint(spec.SemverConstraint)
		if err != nil {
			return s, fmt.Errorf("spec.git.semverConstraint: %q is not a semantic version constraint: %w", spec.SemverConstraint, err)
		}
		s.constraint = c
	}
	return s, nil
}

// usesTags reports whether releases are tags rather than branch heads.
func (s selection) usesTags() bool { return s.strategy != promotionv1alpha1.NewestFromBranch }

// version is what orders releases and candidates alike: the tag, its
// parsed semantic version (SemVer only), and the commit time.
type version struct {
	tag  string
	sv   *semver.Version
	time time.Time
}

// versionOf returns the version of a commit with tag, and whether the
// selection admits it: with SemVer, only tags that parse as semantic
// versions within the constraint; with the other tag strategies, any tag
// short enough to record.
func (s selection) versionOf(tag string, at time.Time) (version, bool) {
	v := version{tag: tag, time: at}
	if !s.usesTags() {
		return v, true
	}
	if tag == "" || len(tag) > maxTagLength {
		return v, false
	}
	if s.strategy != promotionv1alpha1.SemVer {
		return v, true
	}
	sv, err := semver.NewVersion(tag)
	if err != nil || (s.constraint != nil && !s.constraint.Check(sv)) {
		return v, false
	}
	v.sv = sv
	return v, true
}

// compare orders versions newest first, as the strategy reads "newest":
// a negative result means a is newer than b. SemVer compares versions,
// Lexical tag names, NewestTag and NewestFromBranch commit times; ties are
// broken by the other fields so that the order is total.
func (s selection) compare(a, b version) int {
	byTime := b.time.Compare(a.time)
	byTag := strings.Compare(b.tag, a.tag)
	switch s.strategy {
	case promotionv1alpha1.SemVer:
		if a.sv != nil && b.sv != nil {
			if c := b.sv.Compare(a.sv); c != 0 {
				return c
			}
		}
		return cmp.Or(byTime, byTag)
	case promotionv1alpha1.Lexical:
		return cmp.Or(byTag, byTime)
	default:
		return cmp.Or(byTime, byTag)
	}
}

// candidate is a commit that may become a release, with the tag that made
// it one (tag strategies) or the branch it was the head of.
type candidate struct {
	commit  source.Commit
	tag     string
	branch  string
	version version
}

// branchCandidates walks history (newest first, as source.History returns
// it) down to the first commit that is already a release, and returns the
// commits above it that the path filters admit, newest first.
func (s selection) branchCandidates(history []source.Commit, known func(sha string) bool, branch string) []candidate {
	var out []candidate
	for _, c := range history {
		if known(c.SHA) {
			break
		}
		if s.admits(c) {
			out = append(out, candidate{commit: c, branch: branch, version: version{time: c.Time}})
		}
	}
	return out
}

// admits reports whether commit c passes includePaths and excludePaths: it
// must change a file that no exclude pattern matches and, when there are
// include patterns, that one of them matches. Without filters every commit
// passes; with filters, a commit whose paths are unknown does not.
func (s selection) admits(c source.Commit) bool {
	if len(s.include) == 0 && len(s.exclude) == 0 {
		return true
	}
	if !c.Diffed {
		return false
	}
	for _, p := range c.Paths {
		if matchesAny(s.exclude, p) {
			continue
		}
		if len(s.include) == 0 || matchesAny(s.include, p) {
			return true
		}
	}
	return false
}

// matchesAny reports whether one of patterns matches file.
func matchesAny(patterns []string, file string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matchPath(p, file) })
}

// matchPath reports whether pattern matches file, a slash-separated path
// from the repository's root. A pattern is a prefix of directories or the
// path itself ("infra", "infra/", "infra/main.yaml"), or a glob as
// path.Match reads it, matched against the path and each of its leading
// directories ("infra/*" matches everything below infra), and, when it
// has no slash, against the file's base name ("*.yaml" matches a YAML
// file at any depth). A leading "/" or "./" is ignored.
func matchPath(pattern, file string) bool {
	pattern = strings.TrimPrefix(strings.TrimPrefix(pattern, "./"), "/")
	if pattern == "" {
		return false
	}
	if !strings.ContainsAny(pattern, `*?[\`) {
		dir := strings.TrimSuffix(pattern, "/")
		return file == dir || strings.HasPrefix(file, dir+"/")
	}
	pattern = strings.TrimSuffix(pattern, "/")
	for prefix := file; ; {
		if ok, _ := path.Match(pattern, prefix); ok {
			return true
		}
		i := strings.LastIndexByte(prefix, '/')
		if i < 0 {
			break
		}
		prefix = prefix[:i]
	}
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(file))
		return ok
	}
	return false
}

// orderTags returns the tags the selection admits, newest first as the
// strategy orders them, one per commit (a commit tagged twice counts with
// its newest tag) and at most limit of them. times holds the commit time
// of each tagged commit, by SHA; NewestTag needs it for every tag, the
// other strategies only to break ties.
func (s selection) orderTags(tags []source.Ref, times map[string]time.Time) []candidate {
	var all []candidate
	for _, t := range tags {
		if v, ok := s.versionOf(t.Short(), times[t.Commit]); ok {
			all = append(all, candidate{commit: source.Commit{SHA: t.Commit}, tag: v.tag, version: v})
		}
	}
	slices.SortFunc(all, func(a, b candidate) int { return s.compare(a.version, b.version) })
	seen := map[string]bool{}
	var out []candidate
	for _, c := range all {
		if len(out) == s.limit {
			break
		}
		if !seen[c.commit.SHA] {
			seen[c.commit.SHA] = true
			out = append(out, c)
		}
	}
	return out
}

// newerThan returns the candidates (ordered newest first) that are newer
// than newest, the newest existing release's version, or all of them when
// there is none: a release pruned by retention is never discovered again.
func (s selection) newerThan(candidates []candidate, newest *version) []candidate {
	if newest == nil {
		return candidates
	}
	i := slices.IndexFunc(candidates, func(c candidate) bool { return s.compare(c.version, *newest) >= 0 })
	if i < 0 {
		return candidates
	}
	return candidates[:i]
}

// newest returns the index of the newest of releases the selection admits
// (as compare orders them; then the later created), or -1 when it admits
// none.
func (s selection) newest(releases []promotionv1alpha1.Release) int {
	best, bestVersion := -1, version{}
	for i := range releases {
		rel := &releases[i]
		v, ok := s.versionOf(rel.Spec.Commit.Tag, commitTime(rel))
		if !ok {
			continue
		}
		if best >= 0 {
			c := s.compare(v, bestVersion)
			if c == 0 {
				c = releases[best].CreationTimestamp.Compare(rel.CreationTimestamp.Time) //nolint:gosec // best is an index of releases, set in this loop
			}
			if c >= 0 {
				continue
			}
		}
		best, bestVersion = i, v
	}
	return best
}
