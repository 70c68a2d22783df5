package source

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Limits of a comparison, so that an approver's page stays readable and a
// promotion's records stay small.
const (
	// CompareDepth is how many commits deep the branches and tags are
	// fetched: commits further from their tips are not found.
	CompareDepth = 500
	// MaxCompareCommits bounds the commits a Comparison lists.
	MaxCompareCommits = 50
	// MaxComparePaths bounds the paths a Comparison lists, and the files
	// its patch covers.
	MaxComparePaths = 200
	// MaxComparePatch bounds the patch, in bytes.
	MaxComparePatch = 256 << 10
)

// Comparison is the code between two commits of a repository, under one
// directory.
type Comparison struct {
	// From and To are the commits compared.
	From, To string
	// Reverse says that To is an ancestor of From: the commits listed are
	// taken back out (a rollback).
	Reverse bool
	// Commits are the commits between them (reachable from the newer and
	// not from the older), newest first, at most MaxCompareCommits; their
	// Paths are not set.
	Commits []Commit
	// CommitCount is how many there are in all.
	CommitCount int
	// Paths are the files changed under the directory, from the root of
	// the repository, sorted, at most MaxComparePaths.
	Paths []string
	// PathCount is how many there are in all.
	PathCount int
	// Patch is the unified diff of those files, from From to To, at most
	// MaxComparePatch bytes.
	Patch string
	// PatchTruncated says that the patch was cut.
	PatchTruncated bool
}

// Compare fetches the branches and tags of the repository at url,
// CompareDepth commits deep, and compares the commit from with the commit
// to under dir ("" or "." for the whole repository): the commits between
// them, the files changed and their unified diff. When to is an ancestor
// of from, the comparison is Reverse: the commits listed are those from
// adds over to. Errors are *Error; a commit not found among what was
// fetched is ReasonNotFound.
func Compare(ctx context.Context, url string, auth *GitAuth, from, to, dir string) (*Comparison, error) {
	specs := []config.RefSpec{"+refs/heads/*:" + fetchedPrefix + "heads/*", "+refs/tags/*:" + fetchedPrefix + "tags/*"}
	repo, err := fetchSpecs(ctx, url, auth, specs, CompareDepth)
	if err != nil {
		return nil, err
	}
	return compareIn(ctx, repo, from, to, dir)
}

// compareIn compares from with to in repo.
func compareIn(ctx context.Context, repo *git.Repository, from, to, dir string) (*Comparison, error) {
	fc, err := commitIn(repo, from)
	if err != nil {
		return nil, err
	}
	tc, err := commitIn(repo, to)
	if err != nil {
		return nil, err
	}
	out := &Comparison{From: from, To: to}
	listed := between(repo.Storer, tc, fc)
	if len(listed) == 0 && from != to {
		if back := between(repo.Storer, fc, tc); len(back) > 0 {
			listed, out.Reverse = back, true
		}
	}
	out.CommitCount = len(listed)
	for _, c := range listed[:min(len(listed), MaxCompareCommits)] {
		msg := strings.TrimRight(c.Message, "\n")
		subject, _, _ := strings.Cut(msg, "\n")
		out.Commits = append(out.Commits, Commit{
			SHA: c.Hash.String(), Subject: strings.TrimSpace(subject), Message: msg,
			Author: fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email), Time: c.Author.When,
		})
	}
	if err := diffUnder(ctx, out, fc, tc, dir); err != nil {
		return nil, err
	}
	return out, nil
}

// commitIn finds the commit sha in repo.
func commitIn(repo *git.Repository, sha string) (*object.Commit, error) {
	if !IsCommit(sha) {
		return nil, newError(ReasonNotFound, FieldCommit, nil, "%q is not a full commit SHA", sha)
	}
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, newError(ReasonNotFound, FieldCommit, err,
			"commit %s is not among the last %d commits of the repository's branches and tags", sha, CompareDepth)
	}
	return c, nil
}

// between lists the commits reachable from newer and not from older
// (within what was fetched), newest first by author time.
func between(store storer.EncodedObjectStorer, newer, older *object.Commit) []*object.Commit {
	exclude := map[plumbing.Hash]bool{}
	walk(store, older, func(c *object.Commit) bool { exclude[c.Hash] = true; return true })
	var out []*object.Commit
	walk(store, newer, func(c *object.Commit) bool {
		if exclude[c.Hash] {
			return false
		}
		out = append(out, c)
		return true
	})
	slices.SortStableFunc(out, func(a, b *object.Commit) int {
		return cmp.Or(b.Author.When.Compare(a.Author.When), strings.Compare(a.Hash.String(), b.Hash.String()))
	})
	return out
}

// walk visits c and its ancestors in store, each once, as far as they
// were fetched; visit returns false to leave a commit's parents out.
func walk(store storer.EncodedObjectStorer, c *object.Commit, visit func(*object.Commit) bool) {
	seen := map[plumbing.Hash]bool{c.Hash: true}
	queue := []*object.Commit{c}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if !visit(cur) {
			continue
		}
		for _, h := range cur.ParentHashes {
			if seen[h] {
				continue
			}
			seen[h] = true
			p, err := object.GetCommit(store, h)
			if err != nil {
				// The shallow end: a parent that was not fetched.
				continue
			}
			queue = append(queue, p)
		}
	}
}

// diffUnder sets the paths and patch of out: the files that differ between
// from's tree and to's under dir.
func diffUnder(ctx context.Context, out *Comparison, from, to *object.Commit, dir string) error {
	ft, err := from.Tree()
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "reading the tree of %s: %v", from.Hash, err)
	}
	tt, err := to.Tree()
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "reading the tree of %s: %v", to.Hash, err)
	}
	changes, err := object.DiffTreeContext(ctx, ft, tt)
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "comparing %s with %s: %v", from.Hash, to.Hash, err)
	}
	prefix := strings.Trim(path.Clean("/"+dir), "/")
	var kept object.Changes
	for _, ch := range changes {
		name := cmp.Or(ch.To.Name, ch.From.Name)
		if !under(name, prefix) && !under(ch.From.Name, prefix) {
			continue
		}
		out.PathCount++
		if len(kept) < MaxComparePaths {
			kept = append(kept, ch)
			out.Paths = append(out.Paths, name)
		}
	}
	slices.Sort(out.Paths)
	if len(kept) == 0 {
		return nil
	}
	patch, err := kept.PatchContext(ctx)
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "computing the diff of %s and %s: %v", from.Hash, to.Hash, err)
	}
	text := patch.String()
	if len(text) > MaxComparePatch {
		cut := strings.LastIndexByte(text[:MaxComparePatch], '\n') + 1
		text, out.PatchTruncated = text[:cut], true
	}
	out.Patch = text
	return nil
}

// under reports whether name is prefix or inside it ("" is the root).
func under(name, prefix string) bool {
	return name != "" && (prefix == "" || name == prefix || strings.HasPrefix(name, prefix+"/"))
}
