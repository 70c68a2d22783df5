package source

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-logr/logr"
)

// Ref is a reference a git remote advertises.
type Ref struct {
	// Name is the full name: "refs/heads/main", "refs/tags/v1.2.0", "HEAD".
	Name string
	// Commit is the object the ref points to, an annotated tag peeled to
	// the commit it tags; for a symbolic ref, that of its target.
	Commit string
	// Target is the ref a symbolic ref (HEAD) points to, "" for others.
	Target string
}

// IsBranch reports whether r is a branch (refs/heads/…).
func (r Ref) IsBranch() bool { return plumbing.ReferenceName(r.Name).IsBranch() }

// IsTag reports whether r is a tag (refs/tags/…).
func (r Ref) IsTag() bool { return plumbing.ReferenceName(r.Name).IsTag() }

// Short returns the name without its refs/heads/ or refs/tags/ prefix.
func (r Ref) Short() string { return plumbing.ReferenceName(r.Name).Short() }

// ListRefs returns every ref the repository at url advertises, sorted by
// name, as `git ls-remote` lists them but with annotated tags peeled.
// Errors are *Error, as LsRemote's.
func ListRefs(ctx context.Context, url string, auth *GitAuth) ([]Ref, error) {
	advertised, _, err := remoteRefs(ctx, url, auth)
	if err != nil {
		return nil, err
	}
	peeled := map[string]string{}
	hashes := map[plumbing.ReferenceName]string{}
	for _, r := range advertised {
		if name, ok := strings.CutSuffix(r.Name().String(), "^{}"); ok {
			peeled[name] = r.Hash().String()
		} else if r.Type() == plumbing.HashReference {
			hashes[r.Name()] = r.Hash().String()
		}
	}
	var refs []Ref
	for _, r := range advertised {
		name := r.Name().String()
		if strings.HasSuffix(name, "^{}") {
			continue
		}
		ref := Ref{Name: name, Commit: hashes[r.Name()]}
		if r.Type() == plumbing.SymbolicReference {
			ref.Target = r.Target().String()
			ref.Commit = hashes[r.Target()]
		}
		if p, ok := peeled[name]; ok {
			ref.Commit = p
		}
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.Name, b.Name) })
	return refs, nil
}

// remoteRefs validates url and auth and lists the remote's references; it
// returns the URL go-git was given (credentials moved out of it).
func remoteRefs(ctx context.Context, url string, auth *GitAuth) ([]*plumbing.Reference, string, error) {
	ep, err := parseGitURL(url)
	if err != nil {
		return nil, "", err
	}
	ra, err := resolveAuth(ctx, url, ep, auth)
	if err != nil {
		return nil, "", err
	}
	for _, w := range ra.warnings {
		logr.FromContextOrDiscard(ctx).Info("WARNING: "+w, "url", redactURL(ra.url))
	}
	refs, err := listRefs(ctx, ra.url, ra)
	ra.settle(err)
	return refs, ra.url, err
}

// HeadOf finds branch (a name such as "main", a full ref, or "" for the
// remote's default branch) in refs, as ListRefs returned them. A branch
// that is not there is an *Error with ReasonNotFound and FieldBranch.
func HeadOf(refs []Ref, branch string) (Ref, error) {
	want, err := refName(branch)
	if err != nil {
		return Ref{}, err
	}
	find := func(name string) (Ref, bool) {
		i := slices.IndexFunc(refs, func(r Ref) bool { return r.Name == name })
		if i < 0 {
			return Ref{}, false
		}
		return refs[i], true
	}
	r, ok := find(want.String())
	if ok && r.Target != "" {
		r, ok = find(r.Target)
	}
	if !ok || r.Commit == "" {
		if want == plumbing.HEAD {
			return Ref{}, newError(ReasonNotFound, FieldBranch, nil, "the repository has no default branch")
		}
		return Ref{}, newError(ReasonNotFound, FieldBranch, nil, "branch %q not found", want.Short())
	}
	return r, nil
}

// Tags returns the tags among refs.
func Tags(refs []Ref) []Ref {
	var tags []Ref
	for _, r := range refs {
		if r.IsTag() {
			tags = append(tags, r)
		}
	}
	return tags
}

// Refs returns every ref of the repository at repoURL, as ListRefs would,
// shared like Latest: answered from a query that started at most maxAge
// ago, one query in flight per repository and credentials, failures
// shared too. So many Pipelines on one repository make one query per
// interval, whatever branch or tags each follows. The caller may modify
// the returned slice.
func (p *Poller) Refs(ctx context.Context, repoURL string, auth *GitAuth, maxAge time.Duration) ([]Ref, error) {
	key := p.key(repoURL, "", auth)
	key.all = true
	r, err := p.shared(ctx, key, maxAge, func(qctx context.Context) pollResult {
		var r pollResult
		r.refs, r.err = p.listRefs(qctx, repoURL, auth)
		return r
	})
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.refs), r.err
}
