package source

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/go-logr/logr"
)

// GitSpec says which program source to fetch from a git repository.
type GitSpec struct {
	// URL is the repository, http(s)://, ssh:// or user@host:path.
	URL string
	// Branch is a branch name ("main") or a full ref ("refs/heads/main",
	// "refs/tags/v1"). Empty, with no Commit, means the remote's default
	// branch. Mutually exclusive with Commit.
	Branch string
	// Commit is an exact commit SHA to check out, as IsCommit accepts.
	Commit string
	// Shallow fetches only the one commit (depth 1) instead of history.
	Shallow bool
	// Dir is the subdirectory holding Pulumi.yaml; empty means the root.
	Dir string
	// Auth holds the credentials, nil for anonymous access.
	Auth *GitAuth
}

// Result describes a completed fetch.
type Result struct {
	// Commit is the resolved commit SHA (git sources only).
	Commit string
	// Digest is the verified "algo:hex" digest (artifact sources only).
	Digest string
	// Dir is the absolute path of the program directory inside the target.
	Dir string
	// Warnings are notes a user should see, such as disabled host-key
	// checking; they are also logged.
	Warnings []string
}

// commitPattern matches a full SHA-1 commit ID in lower case.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// IsCommit reports whether s is a commit SHA as a git source takes it: the
// full 40 lower-case hex digits, never an abbreviation, which could name a
// different commit once the repository grows. Everything that tells a
// commit from a branch or tag goes through it.
func IsCommit(s string) bool { return commitPattern.MatchString(s) }

// fetchedRef is where the wanted commit lands in the fresh repository.
const fetchedRef = plumbing.ReferenceName("refs/stackyard/fetched")

// FetchGit clones spec into target and returns the commit checked out.
// Content is assembled beside target and renamed into place only on
// success, so on error target keeps its previous content (or stays absent).
// The repository metadata (.git) is kept, as Pulumi reads it for update
// tags.
func FetchGit(ctx context.Context, target string, spec GitSpec) (*Result, error) {
	log := logr.FromContextOrDiscard(ctx)
	ep, sub, err := validateGitSpec(spec)
	if err != nil {
		return nil, err
	}
	ra, err := resolveAuth(ctx, spec.URL, ep, spec.Auth)
	if err != nil {
		return nil, err
	}
	spec.URL = ra.url
	for _, w := range ra.warnings {
		log.Info("WARNING: "+w, "url", redactURL(spec.URL))
	}
	res := &Result{Warnings: ra.warnings}
	err = place(target, func(dir string) error {
		sha, err := cloneInto(ctx, dir, spec, ra)
		if err != nil {
			return err
		}
		res.Commit = sha
		return checkProgramDir(dir, sub, "commit "+sha)
	})
	ra.settle(err)
	if err != nil {
		return nil, err
	}
	res.Dir = programPath(target, sub)
	log.V(1).Info("fetched git source", "url", redactURL(spec.URL), "commit", res.Commit)
	return res, nil
}

// LsRemote returns the commit SHA that ref ("main", "refs/heads/main", a
// full tag ref, or "" for the default branch) points to in the repository
// at url, without cloning. Controllers use it to poll branches.
func LsRemote(ctx context.Context, url, ref string, auth *GitAuth) (string, error) {
	if _, err := parseGitURL(url); err != nil {
		return "", err
	}
	name, err := refName(ref)
	if err != nil {
		return "", err
	}
	refs, url, err := remoteRefs(ctx, url, auth)
	if err != nil {
		return "", err
	}
	_, hash, err := findRef(refs, name, url)
	return hash, err
}

// validateGitSpec checks spec without touching the network.
func validateGitSpec(spec GitSpec) (*transport.Endpoint, string, error) {
	ep, err := parseGitURL(spec.URL)
	if err != nil {
		return nil, "", err
	}
	if spec.Branch != "" && spec.Commit != "" {
		return nil, "", newError(ReasonInvalidSpec, FieldCommit, nil, "%q: set either a branch or a commit, not both", spec.Commit)
	}
	if spec.Commit != "" && !IsCommit(spec.Commit) {
		return nil, "", newError(ReasonInvalidSpec, FieldCommit, nil, "%q is not a commit: give its full 40-character lower-case hex SHA", spec.Commit)
	}
	if _, err := refName(spec.Branch); err != nil {
		return nil, "", err
	}
	sub, err := cleanSubdir(spec.Dir)
	if err != nil {
		return nil, "", err
	}
	return ep, sub, nil
}

// remoteHelperPattern matches git's "<transport>::<address>" syntax, which
// hands the address to a helper program (ext:: runs any command). go-git
// would read such a URL as an scp-style SSH address of host <transport>.
var remoteHelperPattern = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)::`)

// parseGitURL accepts http, https, ssh and git URLs. Local paths and
// file:// are refused because they would read the fetcher's own disk, and
// remote helpers (ext::, fd::, ...) because they run programs.
func parseGitURL(url string) (*transport.Endpoint, error) {
	if url == "" {
		return nil, newError(ReasonInvalidSpec, FieldURL, nil, "required")
	}
	if m := remoteHelperPattern.FindStringSubmatch(url); m != nil {
		return nil, unsupportedScheme(url, m[1])
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, newError(ReasonInvalidSpec, FieldURL, nil, "%q is not a valid git URL", redactURL(url))
	}
	switch ep.Protocol {
	case "http", "https", "ssh", "git":
		return ep, nil
	}
	return nil, unsupportedScheme(url, ep.Protocol)
}

// unsupportedScheme is the error for a URL whose scheme (or transport)
// no fetch supports.
func unsupportedScheme(url, scheme string) *Error {
	return newError(ReasonInvalidSpec, FieldURL, nil, "%q: unsupported URL scheme %q (use https or ssh)", redactURL(url), scheme)
}

// refName turns a branch field into a full reference name; "" means HEAD.
func refName(ref string) (plumbing.ReferenceName, error) {
	if ref == "" {
		return plumbing.HEAD, nil
	}
	name := plumbing.ReferenceName(ref)
	if !strings.HasPrefix(ref, "refs/") {
		name = plumbing.NewBranchReferenceName(ref)
	}
	if err := name.Validate(); err != nil || strings.HasPrefix(ref, "-") {
		return "", newError(ReasonInvalidSpec, FieldBranch, nil, "%q is not a valid branch or ref name", ref)
	}
	return name, nil
}

// cloneInto fetches the wanted commit into an empty directory, checks it
// out and returns its SHA.
func cloneInto(ctx context.Context, dir string, spec GitSpec, ra *resolvedAuth) (string, error) {
	refs, err := listRefs(ctx, spec.URL, ra)
	if err != nil {
		return "", err
	}
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return "", newError(ReasonInternal, FieldNone, err, "initialising repository: %v", err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{spec.URL}}); err != nil {
		return "", newError(ReasonInternal, FieldNone, err, "configuring remote: %v", err)
	}
	depth := 0
	if spec.Shallow {
		depth = 1
	}
	var branch plumbing.ReferenceName
	var src string
	if spec.Commit != "" {
		src = spec.Commit
	} else {
		want, _ := refName(spec.Branch)
		name, _, err := findRef(refs, want, spec.URL)
		if err != nil {
			return "", err
		}
		src = name.String()
		if name.IsBranch() {
			branch = name
		}
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec("+" + src + ":" + fetchedRef.String())},
		Depth:      depth,
		Auth:       ra.method,
		Tags:       git.NoTags,
	})
	if err == git.ErrExactSHA1NotSupported {
		// Servers that refuse fetching by SHA still serve the commit as
		// part of a full fetch (no depth: it may be deep in history) of
		// the branches and tags that contain it.
		err = repo.FetchContext(ctx, &git.FetchOptions{
			RemoteName: "origin",
			RefSpecs:   []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"},
			Auth:       ra.method,
			Tags:       git.NoTags,
		})
		if err == nil {
			err = repo.Storer.SetReference(plumbing.NewHashReference(fetchedRef, plumbing.NewHash(spec.Commit)))
		}
	}
	if err != nil && err != git.NoErrAlreadyUpToDate {
		if spec.Commit != "" && !isTransportFailure(err) {
			return "", newError(ReasonNotFound, FieldCommit, err, "commit %s not found in %s", spec.Commit, redactURL(spec.URL))
		}
		return "", classifyGitError(err, ra.secrets, "fetching "+redactURL(spec.URL))
	}
	return checkout(repo, spec, branch)
}

// checkout resolves the fetched ref to a commit and checks it out: on a
// local branch of the same name when a branch was fetched, detached
// otherwise.
func checkout(repo *git.Repository, spec GitSpec, branch plumbing.ReferenceName) (string, error) {
	ref, err := repo.Reference(fetchedRef, false)
	if err != nil {
		return "", newError(ReasonNotFound, FieldCommit, err, "commit %s not found in %s", spec.Commit, redactURL(spec.URL))
	}
	hash := ref.Hash()
	if tag, err := repo.TagObject(hash); err == nil {
		c, err := tag.Commit()
		if err != nil {
			return "", newError(ReasonInvalidSpec, FieldBranch, err, "%q: the tag does not point to a commit", spec.Branch)
		}
		hash = c.Hash
	}
	if _, err := repo.CommitObject(hash); err != nil {
		return "", newError(ReasonNotFound, FieldCommit, err, "commit %s not found in %s", hash, redactURL(spec.URL))
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", newError(ReasonInternal, FieldNone, err, "opening work tree: %v", err)
	}
	opts := &git.CheckoutOptions{Hash: hash, Force: true}
	if branch != "" {
		opts.Branch = branch
		opts.Create = true
	}
	if err := wt.Checkout(opts); err != nil {
		return "", newError(ReasonInternal, FieldNone, err, "checking out %s: %v", hash, err)
	}
	_ = repo.Storer.RemoveReference(fetchedRef)
	return hash.String(), nil
}

// listRefs asks the remote for its references; this is where unreachable
// servers, bad credentials and missing repositories show up.
func listRefs(ctx context.Context, url string, ra *resolvedAuth) ([]*plumbing.Reference, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: ra.method, PeelingOption: git.AppendPeeled})
	if err != nil {
		return nil, classifyGitError(err, ra.secrets, "listing refs of "+redactURL(url))
	}
	return refs, nil
}

// findRef looks want up in an advertised ref list, following a symbolic
// HEAD and preferring the peeled commit of an annotated tag. It returns the
// concrete ref name and the commit SHA.
func findRef(refs []*plumbing.Reference, want plumbing.ReferenceName, url string) (plumbing.ReferenceName, string, error) {
	byName := make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs))
	for _, r := range refs {
		byName[r.Name()] = r
	}
	name := want
	r, ok := byName[name]
	if ok && r.Type() == plumbing.SymbolicReference {
		name = r.Target()
		r, ok = byName[name]
	}
	if !ok {
		what := fmt.Sprintf("branch %q", want.Short())
		if want == plumbing.HEAD {
			what = "the default branch"
		}
		return "", "", newError(ReasonNotFound, FieldBranch, nil, "%s not found in %s", what, redactURL(url))
	}
	if name == plumbing.HEAD {
		// No symref advertised: HEAD is only a hash; fetch it by name.
		return name, r.Hash().String(), nil
	}
	hash := r.Hash().String()
	if peeled, ok := byName[plumbing.ReferenceName(name.String()+"^{}")]; ok {
		hash = peeled.Hash().String()
	}
	return name, hash, nil
}
