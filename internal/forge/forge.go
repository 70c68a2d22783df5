// Package forge speaks the REST APIs of the forges stackyard writes back
// to: Gitea (and Forgejo), GitHub and GitLab. It lists a repository's open
// pull requests, writes one comment on a pull request and edits it, and
// sets commit statuses. It is the one place that knows their paths,
// payloads and authentication headers; the pull-request previews and the
// commit-status notifications both go through it.
package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/redact"
	"github.com/stackyard/stackyard/internal/verify"
)

// DefaultTimeout bounds one request.
const DefaultTimeout = 10 * time.Second

// maxAnswer is how much of a refusal's body is quoted in an error.
const maxAnswer = 256

// maxBody is how much of an answer is read.
const maxBody = 8 << 20

// pageSize is how many pull requests or comments one request lists; a
// repository with more open pull requests previews the oldest.
const pageSize = 50

// maxDescription is the length commit status descriptions are cut to.
const maxDescription = 140

// Client calls one forge's API for one repository.
type Client struct {
	// Forge is the API's dialect.
	Forge promotionv1alpha1.Forge
	// API is the API's root URL.
	API string
	// Token is the API token.
	Token string
	// Repo is the repository's path: "owner/name" (GitLab:
	// "group/subgroup/name").
	Repo string
	// HTTP makes the requests; verify.NewHTTPClient(false) when nil,
	// which refuses link-local and metadata addresses and redirects to
	// other hosts.
	HTTP *http.Client
}

// New returns a Client for the repository at repoURL.
func New(f promotionv1alpha1.Forge, api, token, repoURL string) (*Client, error) {
	path, err := RepoPath(repoURL)
	if err != nil {
		return nil, err
	}
	if f != promotionv1alpha1.ForgeGitLab && strings.Count(path, "/") < 1 {
		return nil, fmt.Errorf("the repository %q has no owner/name path", path)
	}
	u, err := url.Parse(api)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("the API URL must be an http:// or https:// URL")
	}
	return &Client{Forge: f, API: strings.TrimRight(api, "/"), Token: token, Repo: path}, nil
}

// RepoPath returns the path of a repository URL without ".git" ("owner/
// name", or "group/subgroup/name" on GitLab): https://, http://, ssh://
// and scp-like (git@host:owner/name.git) URLs.
func RepoPath(repoURL string) (string, error) {
	var p string
	if !strings.Contains(repoURL, "://") {
		_, after, ok := strings.Cut(repoURL, ":")
		if !ok {
			return "", errors.New("the repository URL has no path")
		}
		p = after
	} else {
		u, err := url.Parse(repoURL)
		if err != nil {
			return "", errors.New("the repository URL cannot be parsed")
		}
		p = u.Path
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	if p == "" {
		return "", errors.New("the repository URL has no path")
	}
	return p, nil
}

// PullRequest is an open pull request (GitLab: merge request).
type PullRequest struct {
	// Number is its number (GitLab: iid).
	Number int64
	// Title is its title.
	Title string
	// Head is the commit at its head.
	Head string
	// Fork says it comes from another repository (or one since deleted).
	Fork bool
	// URL is its page.
	URL string
}

// Status is a commit status.
type Status struct {
	// State is pending, success or failure (GitHub's and Gitea's names;
	// GitLab's failed is written for failure).
	State string
	// Context names the status among the commit's (GitLab: name).
	Context string
	// Description is cut to 140 characters.
	Description string
	// TargetURL is the link the forge shows with it.
	TargetURL string
}

// repoAPI is the API path of the repository: /repos/owner/name, or
// GitLab's /projects/<escaped path>.
func (c *Client) repoAPI() string {
	if c.Forge == promotionv1alpha1.ForgeGitLab {
		return "/projects/" + url.PathEscape(c.Repo)
	}
	owner, name, _ := strings.Cut(c.Repo, "/")
	if i := strings.LastIndex(c.Repo, "/"); i >= 0 {
		owner, name = c.Repo[:i], c.Repo[i+1:]
	}
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// Authorize sets the header a forge takes its API token in.
func Authorize(f promotionv1alpha1.Forge, h http.Header, token string) {
	switch f {
	case promotionv1alpha1.ForgeGitLab:
		h.Set("PRIVATE-TOKEN", token)
	case promotionv1alpha1.ForgeGitHub:
		h.Set("Authorization", "Bearer "+token)
		h.Set("Accept", "application/vnd.github+json")
		h.Set("X-GitHub-Api-Version", "2022-11-28")
	default:
		h.Set("Authorization", "token "+token)
	}
}

// StatusRequest returns the URL and body that set st on commit sha of the
// repository at path through the API at api.
func StatusRequest(f promotionv1alpha1.Forge, api, path, sha string, st Status) (string, any, error) {
	c := &Client{Forge: f, API: strings.TrimRight(api, "/"), Repo: path}
	if f != promotionv1alpha1.ForgeGitLab && !strings.Contains(path, "/") {
		return "", nil, fmt.Errorf("the pipeline's repository %q has no owner/name path", path)
	}
	desc := sreconcile.Truncate(st.Description, maxDescription)
	if f == promotionv1alpha1.ForgeGitLab {
		state := st.State
		if state == "failure" || state == "error" {
			state = "failed"
		}
		body := map[string]string{"state": state, "name": st.Context, "description": desc}
		if st.TargetURL != "" {
			body["target_url"] = st.TargetURL
		}
		return c.API + c.repoAPI() + "/statuses/" + url.PathEscape(sha), body, nil
	}
	body := map[string]string{"state": st.State, "context": st.Context, "description": desc}
	if st.TargetURL != "" {
		body["target_url"] = st.TargetURL
	}
	return c.API + c.repoAPI() + "/statuses/" + url.PathEscape(sha), body, nil
}

// SetStatus sets st on commit sha.
func (c *Client) SetStatus(ctx context.Context, sha string, st Status) error {
	target, body, err := StatusRequest(c.Forge, c.API, c.Repo, sha, st)
	if err != nil {
		return err
	}
	return c.call(ctx, http.MethodPost, target, body, nil)
}

// OpenPullRequests lists the open pull requests into branch base, oldest
// first, at most 50.
func (c *Client) OpenPullRequests(ctx context.Context, base string) ([]PullRequest, error) {
	var prs []PullRequest
	switch c.Forge {
	case promotionv1alpha1.ForgeGitLab:
		var list []struct {
			IID             int64  `json:"iid"`
			Title           string `json:"title"`
			WebURL          string `json:"web_url"`
			SHA             string `json:"sha"`
			SourceProjectID int64  `json:"source_project_id"`
			TargetProjectID int64  `json:"target_project_id"`
			TargetBranch    string `json:"target_branch"`
		}
		q := url.Values{"state": {"opened"}, "target_branch": {base}, "per_page": {strconv.Itoa(pageSize)}, "order_by": {"created_at"}, "sort": {"asc"}}
		if err := c.call(ctx, http.MethodGet, c.API+c.repoAPI()+"/merge_requests?"+q.Encode(), nil, &list); err != nil {
			return nil, err
		}
		for _, mr := range list {
			if mr.TargetBranch != base {
				continue
			}
			prs = append(prs, PullRequest{Number: mr.IID, Title: mr.Title, Head: mr.SHA, URL: mr.WebURL, Fork: mr.SourceProjectID != mr.TargetProjectID})
		}
	default:
		type repo struct {
			ID int64 `json:"id"`
		}
		type end struct {
			Ref  string `json:"ref"`
			SHA  string `json:"sha"`
			Repo *repo  `json:"repo"`
		}
		var list []struct {
			Number  int64  `json:"number"`
			Title   string `json:"title"`
			HTMLURL string `json:"html_url"`
			Head    end    `json:"head"`
			Base    end    `json:"base"`
		}
		q := url.Values{"state": {"open"}}
		if c.Forge == promotionv1alpha1.ForgeGitHub {
			q.Set("base", base)
			q.Set("per_page", strconv.Itoa(pageSize))
			q.Set("sort", "created")
			q.Set("direction", "asc")
		} else {
			q.Set("limit", strconv.Itoa(pageSize))
			q.Set("sort", "oldest")
		}
		if err := c.call(ctx, http.MethodGet, c.API+c.repoAPI()+"/pulls?"+q.Encode(), nil, &list); err != nil {
			return nil, err
		}
		for _, pr := range list {
			if pr.Base.Ref != base {
				continue
			}
			fork := pr.Head.Repo == nil || pr.Base.Repo == nil || pr.Head.Repo.ID != pr.Base.Repo.ID
			prs = append(prs, PullRequest{Number: pr.Number, Title: pr.Title, Head: pr.Head.SHA, URL: pr.HTMLURL, Fork: fork})
		}
	}
	return prs, nil
}

// commentsAPI is the path of the comments of pull request number, and
// of the comment id when id is set.
func (c *Client) commentsAPI(number int64, id string) string {
	if c.Forge == promotionv1alpha1.ForgeGitLab {
		p := c.repoAPI() + "/merge_requests/" + strconv.FormatInt(number, 10) + "/notes"
		if id != "" {
			p += "/" + url.PathEscape(id)
		}
		return p
	}
	if id != "" {
		return c.repoAPI() + "/issues/comments/" + url.PathEscape(id)
	}
	return c.repoAPI() + "/issues/" + strconv.FormatInt(number, 10) + "/comments"
}

// comment is a comment as the three APIs answer it.
type comment struct {
	ID   json.Number `json:"id"`
	Body string      `json:"body"`
}

// FindComment returns the id of the first comment of pull request number
// whose body holds marker, or "" when none does (among its first 100).
func (c *Client) FindComment(ctx context.Context, number int64, marker string) (string, error) {
	q := url.Values{}
	switch c.Forge {
	case promotionv1alpha1.ForgeGitea:
		q.Set("limit", "100")
	default:
		q.Set("per_page", "100")
	}
	var list []comment
	if err := c.call(ctx, http.MethodGet, c.API+c.commentsAPI(number, "")+"?"+q.Encode(), nil, &list); err != nil {
		return "", err
	}
	for _, cm := range list {
		if strings.Contains(cm.Body, marker) {
			return cm.ID.String(), nil
		}
	}
	return "", nil
}

// ErrCommentGone is returned by EditComment when the comment no longer
// exists (someone deleted it).
var ErrCommentGone = errors.New("the comment no longer exists")

// CreateComment adds a comment with body to pull request number and
// returns its id.
func (c *Client) CreateComment(ctx context.Context, number int64, body string) (string, error) {
	var out comment
	if err := c.call(ctx, http.MethodPost, c.API+c.commentsAPI(number, ""), map[string]string{"body": body}, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("the forge answered a new comment without its id")
	}
	return out.ID.String(), nil
}

// EditComment replaces the body of comment id of pull request number.
func (c *Client) EditComment(ctx context.Context, number int64, id, body string) error {
	method := http.MethodPatch
	if c.Forge == promotionv1alpha1.ForgeGitLab {
		method = http.MethodPut
	}
	err := c.call(ctx, method, c.API+c.commentsAPI(number, id), map[string]string{"body": body}, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		return ErrCommentGone
	}
	return err
}

// StatusError is an answer outside 2xx.
type StatusError struct {
	// Code is the HTTP status.
	Code int
	msg  string
}

func (e *StatusError) Error() string { return e.msg }

// call sends body (JSON, when not nil) with method to target and decodes
// the answer into out (when not nil). Errors never hold the token, and
// name the API by its scheme and host.
func (c *Client) call(ctx context.Context, method, target string, body, out any) error {
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
		in = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, in)
	if err != nil {
		return errors.New("building the request: the API URL is not valid")
	}
	Authorize(c.Forge, req.Header, c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "stackyard")
	secrets := redact.New(c.Token)
	where := req.URL.Scheme + "://" + req.URL.Host
	client := c.HTTP
	if client == nil {
		client = verify.NewHTTPClient(false)
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("%s %s: %s", method, where, secrets.Redact(err.Error()))
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("%s %s%s answered %d %s", method, where, req.URL.Path, resp.StatusCode, http.StatusText(resp.StatusCode))
		if a := strings.TrimSpace(string(data[:min(len(data), maxAnswer)])); a != "" {
			msg += ": " + secrets.Redact(a)
		}
		return &StatusError{Code: resp.StatusCode, msg: msg}
	}
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			return fmt.Errorf("%s %s%s: the answer is not the JSON expected: %v", method, where, req.URL.Path, err)
		}
	}
	return nil
}
