package forge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// GitHub and GitLab cannot run here. These tests answer the client as
// their REST APIs are documented to (docs.github.com "List pull
// requests", "Create an issue comment", "Update an issue comment",
// "Create a commit status"; docs.gitlab.com "Merge requests API", "Notes
// API", "Commits API: set the pipeline status of a commit"), and check the
// requests it makes against the same pages. Gitea is tested for real
// (test/forge, internal/controller/pullrequest).

// call is one request a fake forge received.
type call struct {
	Method, URI string
	Header      http.Header
	Body        map[string]any
}

// fakeForge answers by "METHOD path" with a JSON document and records
// every request.
type fakeForge struct {
	mu      sync.Mutex
	calls   []call
	answers map[string]string
}

func (f *fakeForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	c := call{Method: r.Method, URI: r.URL.RequestURI(), Header: r.Header.Clone()}
	if len(data) > 0 {
		_ = json.Unmarshal(data, &c.Body)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	answer, ok := f.answers[r.Method+" "+r.URL.EscapedPath()]
	if !ok {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, answer)
}

func newFake(t *testing.T, answers map[string]string) (*fakeForge, string) {
	f := &fakeForge{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func TestRepoPath(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"https://github.com/acme/web.git":         "acme/web",
		"https://github.com/acme/web":             "acme/web",
		"ssh://git@gitea.example.com/acme/web":    "acme/web",
		"git@gitlab.com:group/sub/web.git":        "group/sub/web",
		"https://gitea.example.com/acme/web.git/": "acme/web",
	} {
		got, err := RepoPath(in)
		g.Expect(err).NotTo(HaveOccurred(), in)
		g.Expect(got).To(Equal(want), in)
	}
	_, err := RepoPath("https://example.com/")
	g.Expect(err).To(HaveOccurred())
}

// githubPulls is GitHub's "List pull requests" answer, cut to the fields
// read: a branch of the repository and a pull request from a fork.
const githubPulls = `[
  {"number": 1347, "state": "open", "title": "Amazing new feature", "html_url": "https://github.com/octocat/Hello-World/pull/1347",
   "head": {"label": "octocat:new-topic", "ref": "new-topic", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
            "repo": {"id": 1296269, "full_name": "octocat/Hello-World"}},
   "base": {"label": "octocat:master", "ref": "master", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
            "repo": {"id": 1296269, "full_name": "octocat/Hello-World"}}},
  {"number": 1348, "state": "open", "title": "From a fork", "html_url": "https://github.com/octocat/Hello-World/pull/1348",
   "head": {"ref": "patch-1", "sha": "aa218f56b14c9653891f9e74264a383fa43fefbd", "repo": {"id": 99, "full_name": "someone/Hello-World"}},
   "base": {"ref": "master", "repo": {"id": 1296269, "full_name": "octocat/Hello-World"}}},
  {"number": 1349, "state": "open", "title": "Fork deleted",
   "head": {"ref": "patch-2", "sha": "bb218f56b14c9653891f9e74264a383fa43fefbd", "repo": null},
   "base": {"ref": "master", "repo": {"id": 1296269}}}
]`

func TestGitHub(t *testing.T) {
	g := NewWithT(t)
	fake, api := newFake(t, map[string]string{
		"GET /repos/octocat/Hello-World/pulls":                                              githubPulls,
		"GET /repos/octocat/Hello-World/issues/1347/comments":                               `[{"id": 1, "body": "Me too"}, {"id": 1000, "body": "<!-- stackyard -->\nold"}]`,
		"POST /repos/octocat/Hello-World/issues/1348/comments":                              `{"id": 1001, "body": "new"}`,
		"PATCH /repos/octocat/Hello-World/issues/comments/1000":                             `{"id": 1000, "body": "edited"}`,
		"POST /repos/octocat/Hello-World/statuses/6dcb09b5b57875f334f61aebed695e2e4193db5e": `{"id": 1, "state": "success"}`,
	})
	c, err := New(promotionv1alpha1.ForgeGitHub, api, "ghp_token", "https://github.com/octocat/Hello-World.git")
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()

	prs, err := c.OpenPullRequests(ctx, "master")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prs).To(Equal([]PullRequest{
		{Number: 1347, Title: "Amazing new feature", Head: "6dcb09b5b57875f334f61aebed695e2e4193db5e", URL: "https://github.com/octocat/Hello-World/pull/1347"},
		{Number: 1348, Title: "From a fork", Head: "aa218f56b14c9653891f9e74264a383fa43fefbd", URL: "https://github.com/octocat/Hello-World/pull/1348", Fork: true},
		{Number: 1349, Title: "Fork deleted", Head: "bb218f56b14c9653891f9e74264a383fa43fefbd", Fork: true},
	}))
	id, err := c.FindComment(ctx, 1347, "<!-- stackyard -->")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal("1000"))
	g.Expect(c.EditComment(ctx, 1347, id, "edited")).To(Succeed())
	id, err = c.CreateComment(ctx, 1348, "new")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal("1001"))
	g.Expect(c.EditComment(ctx, 1348, "5", "x")).To(MatchError(ErrCommentGone))
	g.Expect(c.SetStatus(ctx, "6dcb09b5b57875f334f61aebed695e2e4193db5e", Status{
		State: "success", Context: "stackyard/preview/web", Description: strings.Repeat("é", 200), TargetURL: "https://dash.example.com/x",
	})).To(Succeed())

	calls := fake.calls
	g.Expect(calls[0].URI).To(Equal("/repos/octocat/Hello-World/pulls?base=master&direction=asc&per_page=50&sort=created&state=open"))
	g.Expect(calls[1].URI).To(Equal("/repos/octocat/Hello-World/issues/1347/comments?per_page=100"))
	g.Expect(calls[2]).To(SatisfyAll(HaveField("Method", "PATCH"), HaveField("Body", map[string]any{"body": "edited"})))
	g.Expect(calls[3]).To(SatisfyAll(HaveField("Method", "POST"), HaveField("URI", "/repos/octocat/Hello-World/issues/1348/comments"),
		HaveField("Body", map[string]any{"body": "new"})))
	status := calls[5]
	g.Expect(status.Body).To(HaveKeyWithValue("state", "success"))
	g.Expect(status.Body).To(HaveKeyWithValue("context", "stackyard/preview/web"))
	g.Expect(status.Body).To(HaveKeyWithValue("target_url", "https://dash.example.com/x"))
	desc := status.Body["description"].(string)
	g.Expect(len(desc)).To(BeNumerically("<=", 140), "descriptions are cut to 140 bytes")
	g.Expect(utf8.ValidString(desc)).To(BeTrue(), "a description is cut inside a character")
	for _, c := range calls {
		g.Expect(c.Header.Get("Authorization")).To(Equal("Bearer ghp_token"))
		g.Expect(c.Header.Get("Accept")).To(Equal("application/vnd.github+json"))
		g.Expect(c.Header.Get("X-GitHub-Api-Version")).To(Equal("2022-11-28"))
	}
}

// gitlabMergeRequests is GitLab's "List project merge requests" answer,
// cut to the fields read.
const gitlabMergeRequests = `[
  {"id": 84, "iid": 14, "project_id": 3, "title": "Change the page", "state": "opened", "target_branch": "main", "source_branch": "feature",
   "source_project_id": 3, "target_project_id": 3, "sha": "8888888888888888888888888888888888888888", "web_url": "https://gitlab.example.com/group/sub/web/-/merge_requests/14"},
  {"id": 85, "iid": 15, "project_id": 3, "title": "From a fork", "state": "opened", "target_branch": "main",
   "source_project_id": 7, "target_project_id": 3, "sha": "9999999999999999999999999999999999999999", "web_url": "https://gitlab.example.com/group/sub/web/-/merge_requests/15"}
]`

func TestGitLab(t *testing.T) {
	g := NewWithT(t)
	const project = "/projects/group%2Fsub%2Fweb"
	fake, api := newFake(t, map[string]string{
		"GET " + project + "/merge_requests":                                     gitlabMergeRequests,
		"GET " + project + "/merge_requests/14/notes":                            `[{"id": 301, "body": "lgtm"}]`,
		"POST " + project + "/merge_requests/14/notes":                           `{"id": 302, "body": "new", "noteable_iid": 14}`,
		"PUT " + project + "/merge_requests/14/notes/302":                        `{"id": 302, "body": "edited"}`,
		"POST " + project + "/statuses/8888888888888888888888888888888888888888": `{"id": 93, "status": "failed"}`,
	})
	c, err := New(promotionv1alpha1.ForgeGitLab, api+"/", "glpat-token", "git@gitlab.example.com:group/sub/web.git")
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	prs, err := c.OpenPullRequests(ctx, "main")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prs).To(Equal([]PullRequest{
		{Number: 14, Title: "Change the page", Head: "8888888888888888888888888888888888888888", URL: "https://gitlab.example.com/group/sub/web/-/merge_requests/14"},
		{Number: 15, Title: "From a fork", Head: "9999999999999999999999999999999999999999", URL: "https://gitlab.example.com/group/sub/web/-/merge_requests/15", Fork: true},
	}))
	id, err := c.FindComment(ctx, 14, "<!-- stackyard -->")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(BeEmpty())
	id, err = c.CreateComment(ctx, 14, "new")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.EditComment(ctx, 14, id, "edited")).To(Succeed())
	g.Expect(c.SetStatus(ctx, "8888888888888888888888888888888888888888", Status{State: "failure", Context: "stackyard/preview/web", Description: "1 preview failed"})).To(Succeed())

	calls := fake.calls
	g.Expect(calls[0].URI).To(Equal(project + "/merge_requests?order_by=created_at&per_page=50&sort=asc&state=opened&target_branch=main"))
	g.Expect(calls[3]).To(SatisfyAll(HaveField("Method", "PUT"), HaveField("Body", map[string]any{"body": "edited"})))
	g.Expect(calls[4].Body).To(Equal(map[string]any{"state": "failed", "name": "stackyard/preview/web", "description": "1 preview failed"}))
	for _, c := range calls {
		g.Expect(c.Header.Get("PRIVATE-TOKEN")).To(Equal("glpat-token"))
		g.Expect(c.Header.Get("Authorization")).To(BeEmpty())
	}
}

// TestRefusalHidesToken: an error quotes the forge's answer, never the
// token, even when the forge echoes it.
func TestRefusalHidesToken(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad credentials: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	c, err := New(promotionv1alpha1.ForgeGitea, srv.URL+"/api/v1", "s3cr3t-token", "https://gitea.example.com/acme/web.git")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.OpenPullRequests(context.Background(), "main")
	g.Expect(err).To(MatchError(ContainSubstring("answered 401 Unauthorized")))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t-token"))
	var se *StatusError
	g.Expect(err).To(BeAssignableToTypeOf(se))
}

func TestNewRefuses(t *testing.T) {
	g := NewWithT(t)
	_, err := New(promotionv1alpha1.ForgeGitHub, "ftp://api.github.com", "t", "https://github.com/acme/web.git")
	g.Expect(err).To(MatchError(ContainSubstring("http:// or https://")))
	_, err = New(promotionv1alpha1.ForgeGitHub, "https://api.github.com", "t", "https://github.com/web.git")
	g.Expect(err).To(MatchError(ContainSubstring("owner/name")))
}
