package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/go-logr/logr"
)

// Commit describes one commit, as a release records it.
type Commit struct {
	// SHA is the full commit SHA.
	SHA string
	// Parents are the parents' SHAs, the first parent first.
	Parents []string
	// Subject is the first line of the message.
	Subject string
	// Message is the whole message, without trailing newlines.
	Message string
	// Author is "Name <email>".
	Author string
	// Time is the committer time.
	Time time.Time
	// Paths are the files the commit changes against its first parent
	// (every file, for a commit without parents), sorted. Empty when the
	// first parent was not fetched; Diffed tells the two cases apart.
	Paths []string
	// Diffed reports whether Paths were computed.
	Diffed bool
}

// fetchedPrefix is where fetched refs land in the in-memory repository.
const fetchedPrefix = "refs/stackyard/fetched/"

// History fetches the history of ref (a branch name, a full ref, or "" for
// the default branch) from the repository at url into memory, without a
// work tree, and returns up to depth commits along first parents, newest
// first: the heads the branch had, for branches that take changes by merge
// or fast-forward. One commit more than depth is fetched, so that every
// commit returned has its changed paths (Diffed). Errors are *Error; a ref
// the remote does not have is ReasonNotFound with FieldBranch.
func History(ctx context.Context, url, ref string, auth *GitAuth, depth int) ([]Commit, error) {
	name, err := refName(ref)
	if err != nil {
		return nil, err
	}
	repo, tips, err := fetchShallow(ctx, url, auth, []plumbing.ReferenceName{name}, max(depth, 1)+1)
	if err != nil {
		return nil, err
	}
	if tips[0].IsZero() {
		return nil, newError(ReasonNotFound, FieldBranch, nil, "%q does not point to a commit", name.Short())
	}
	var commits []Commit
	for hash := tips[0]; len(commits) < depth; {
		c, err := repo.CommitObject(hash)
		if err != nil {
			break // the shallow end
		}
		d, err := describeCommit(ctx, repo, c)
		if err != nil {
			return nil, err
		}
		commits = append(commits, d)
		if len(c.ParentHashes) == 0 {
			break
		}
		hash = c.ParentHashes[0]
	}
	return commits, nil
}

// Describe fetches the commits that refs (full names, such as tags) point
// to, one commit deep, in one fetch from the repository at url, and returns
// them by SHA; a ref that points to no commit (a tag of a tree) is left
// out. The commits are not Diffed. Errors are *Error.
func Describe(ctx context.Context, url string, refs []string, auth *GitAuth) (map[string]Commit, error) {
	names := make([]plumbing.ReferenceName, len(refs))
	for i, r := range refs {
		n, err := refName(r)
		if err != nil {
			return nil, err
		}
		names[i] = n
	}
	out := map[string]Commit{}
	if len(names) == 0 {
		return out, nil
	}
	repo, tips, err := fetchShallow(ctx, url, auth, names, 1)
	if err != nil {
		return nil, err
	}
	for _, hash := range tips {
		c, err := repo.CommitObject(hash)
		if err != nil {
			continue
		}
		if out[c.Hash.String()], err = describeCommit(ctx, repo, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fetchShallow fetches names, depth commits deep, into a new in-memory
// repository, and returns it with the commit each name points to (tags
// peeled; the zero hash for a name that points to no commit).
func fetchShallow(ctx context.Context, url string, auth *GitAuth, names []plumbing.ReferenceName, depth int) (*git.Repository, []plumbing.Hash, error) {
	specs := make([]config.RefSpec, len(names))
	for i, n := range names {
		specs[i] = config.RefSpec("+" + n.String() + ":" + fetchedPrefix + strconv.Itoa(i))
	}
	repo, err := fetchSpecs(ctx, url, auth, specs, depth)
	if err != nil {
		return nil, nil, err
	}
	tips := make([]plumbing.Hash, len(names))
	for i := range names {
		ref, err := repo.Reference(plumbing.ReferenceName(fetchedPrefix+strconv.Itoa(i)), true)
		if err != nil {
			return nil, nil, newError(ReasonNotFound, FieldBranch, err, "%q was not fetched", names[i].Short())
		}
		tips[i] = ref.Hash()
		if tag, err := repo.TagObject(tips[i]); err == nil {
			tips[i] = plumbing.ZeroHash
			if c, err := tag.Commit(); err == nil {
				tips[i] = c.Hash
			}
		}
	}
	return repo, tips, nil
}

// fetchSpecs fetches the refspecs, depth commits deep (0: all of
// history), into a new in-memory repository without a work tree.
func fetchSpecs(ctx context.Context, url string, auth *GitAuth, specs []config.RefSpec, depth int) (*git.Repository, error) {
	ep, err := parseGitURL(url)
	if err != nil {
		return nil, err
	}
	ra, err := resolveAuth(ctx, url, ep, auth)
	if err != nil {
		return nil, err
	}
	for _, w := range ra.warnings {
		logr.FromContextOrDiscard(ctx).Info("WARNING: "+w, "url", redactURL(ra.url))
	}
	repo, err := git.Init(memory.NewStorage(), nil)
	if err != nil {
		return nil, newError(ReasonInternal, FieldNone, err, "initialising a repository in memory: %v", err)
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{ra.url}})
	err = remote.FetchContext(ctx, &git.FetchOptions{RefSpecs: specs, Depth: depth, Auth: ra.method, Tags: git.NoTags})
	ra.settle(err)
	if errors.Is(err, git.NoMatchingRefSpecError{}) {
		return nil, newError(ReasonNotFound, FieldBranch, err, "%s: %v", redactURL(ra.url), err)
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, classifyGitError(err, ra.secrets, "fetching from "+redactURL(ra.url))
	}
	return repo, nil
}

// describeCommit turns c into a Commit, with the paths it changes when its first
// parent is in repo (or it has none).
func describeCommit(ctx context.Context, repo *git.Repository, c *object.Commit) (Commit, error) {
	msg := strings.TrimRight(c.Message, "\n")
	subject, _, _ := strings.Cut(msg, "\n")
	out := Commit{
		SHA:     c.Hash.String(),
		Subject: strings.TrimSpace(subject),
		Message: msg,
		Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
		Time:    c.Committer.When,
	}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, p.String())
	}
	var parent *object.Tree
	if len(c.ParentHashes) > 0 {
		pc, err := repo.CommitObject(c.ParentHashes[0])
		if err != nil {
			return out, nil // not fetched: the paths are unknown
		}
		if parent, err = pc.Tree(); err != nil {
			return out, newError(ReasonInternal, FieldNone, err, "reading the tree of %s: %v", pc.Hash, err)
		}
	}
	tree, err := c.Tree()
	if err != nil {
		return out, newError(ReasonInternal, FieldNone, err, "reading the tree of %s: %v", c.Hash, err)
	}
	changes, err := object.DiffTreeContext(ctx, parent, tree)
	if err != nil {
		return out, newError(ReasonInternal, FieldNone, err, "comparing %s with its parent: %v", c.Hash, err)
	}
	for _, ch := range changes {
		for _, p := range []string{ch.From.Name, ch.To.Name} {
			if p != "" {
				out.Paths = append(out.Paths, p)
			}
		}
	}
	slices.Sort(out.Paths)
	out.Paths = slices.Compact(out.Paths)
	out.Diffed = true
	return out, nil
}
