package receiver

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
)

// The payloads below follow the shapes the forges document for their push
// events (GitHub "push", GitLab "Push Hook" and "Tag Push Hook", Gitea and
// Forgejo "push", Bitbucket Cloud "repo:push"), cut to the fields a push
// needs plus a few around them. GitHub, GitLab and Bitbucket cannot run in
// the tests; Gitea's own deliveries are what the integration test posts.
const (
	githubPush = `{"ref":"refs/heads/main","before":"0000","after":"1111",
		"repository":{"id":1,"full_name":"acme/web","html_url":"https://github.com/acme/web",
		"clone_url":"https://github.com/acme/web.git","ssh_url":"git@github.com:acme/web.git","git_url":"git://github.com/acme/web.git"},
		"pusher":{"name":"ada"},"commits":[{"id":"1111","message":"m"}]}`
	gitlabPush = `{"object_kind":"push","ref":"refs/heads/main","checkout_sha":"1111",
		"project":{"id":15,"name":"web","web_url":"https://gitlab.example.com/acme/web",
		"git_ssh_url":"git@gitlab.example.com:acme/web.git","git_http_url":"https://gitlab.example.com/acme/web.git"}}`
	gitlabTagPush = `{"object_kind":"tag_push","ref":"refs/tags/v1.2.0",
		"project":{"git_http_url":"https://gitlab.example.com/acme/web.git"}}`
	giteaPush = `{"ref":"refs/heads/main","before":"0000","after":"1111",
		"repository":{"id":1,"full_name":"acme/web","html_url":"http://127.0.0.1:3000/acme/web",
		"clone_url":"http://127.0.0.1:3000/acme/web.git","ssh_url":"ssh://git@127.0.0.1:2222/acme/web.git"}}`
	bitbucketPush = `{"push":{"changes":[{"new":{"type":"branch","name":"main","target":{"hash":"1111"}},"old":{"type":"branch","name":"main"}}]},
		"repository":{"full_name":"acme/web","links":{"html":{"href":"https://bitbucket.org/acme/web"}}}}`
	genericPush = `{"repository":"https://git.example.com/acme/web.git","ref":"refs/heads/main"}`

	// Pull request events (GitHub and Gitea "pull_request", GitLab "Merge
	// Request Hook", Bitbucket Cloud "pullrequest:*"), in the same way.
	githubPullRequest = `{"action":"synchronize","number":2,
		"pull_request":{"number":2,"head":{"ref":"feature","sha":"2222"},"base":{"ref":"main","sha":"1111"}},
		"repository":{"full_name":"acme/web","html_url":"https://github.com/acme/web","clone_url":"https://github.com/acme/web.git"}}`
	giteaPullRequest = `{"action":"opened","number":3,
		"pull_request":{"number":3,"head":{"ref":"feature","sha":"2222"},"base":{"ref":"main","sha":"1111"}},
		"repository":{"full_name":"acme/web","clone_url":"http://127.0.0.1:3000/acme/web.git"}}`
	gitlabMergeRequest = `{"object_kind":"merge_request","event_type":"merge_request",
		"project":{"id":1,"web_url":"https://gitlab.example.com/acme/web","git_http_url":"https://gitlab.example.com/acme/web.git"},
		"object_attributes":{"iid":1,"target_branch":"main","source_branch":"feature","action":"update",
			"target":{"git_http_url":"https://gitlab.example.com/acme/web.git"}}}`
	bitbucketPullRequest = `{"pullrequest":{"id":1,"source":{"branch":{"name":"feature"}},"destination":{"branch":{"name":"main"}}},
		"repository":{"full_name":"acme/web","links":{"html":{"href":"https://bitbucket.org/acme/web"}}}}`
)

// signed is a request of typ for body, signed with token as typ signs.
func signed(typ notificationv1alpha1.ReceiverType, event, body, token string) Request {
	h := http.Header{}
	sig := Sign([]byte(body), token)
	switch typ {
	case notificationv1alpha1.ReceiverGitHub:
		h.Set("X-GitHub-Event", event)
		h.Set("X-Hub-Signature-256", "sha256="+sig)
		h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	case notificationv1alpha1.ReceiverGitLab:
		h.Set("X-Gitlab-Event", event)
		h.Set("X-Gitlab-Token", token)
		h.Set("X-Gitlab-Event-UUID", "13792a34-cac6-4fda-95a8-c58e00a3954e")
	case notificationv1alpha1.ReceiverGitea:
		h.Set("X-Gitea-Event", event)
		h.Set("X-Gitea-Signature", sig)
		h.Set("X-Gitea-Delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473")
	case notificationv1alpha1.ReceiverBitbucket:
		h.Set("X-Event-Key", event)
		h.Set("X-Hub-Signature", "sha256="+sig)
		h.Set("X-Request-UUID", "afe47fc5-fc1c-4a03-a0d9-8bd19fa1a3f8")
	case notificationv1alpha1.ReceiverGeneric:
		h.Set("X-Signature", "sha256="+sig)
	}
	return Request{Header: h, Body: []byte(body)}
}

func TestVerifyAndParse(t *testing.T) {
	const token = "webhook-secret"
	tests := []struct {
		typ    notificationv1alpha1.ReceiverType
		event  string
		body   string
		ref    string
		repo   string // one of the URLs, normalized
		delive bool
		pr     bool
	}{
		{notificationv1alpha1.ReceiverGitHub, "push", githubPush, "refs/heads/main", "github.com/acme/web", true, false},
		{notificationv1alpha1.ReceiverGitLab, "Push Hook", gitlabPush, "refs/heads/main", "gitlab.example.com/acme/web", true, false},
		{notificationv1alpha1.ReceiverGitLab, "Tag Push Hook", gitlabTagPush, "refs/tags/v1.2.0", "gitlab.example.com/acme/web", true, false},
		{notificationv1alpha1.ReceiverGitea, "push", giteaPush, "refs/heads/main", "127.0.0.1/acme/web", true, false},
		{notificationv1alpha1.ReceiverBitbucket, "repo:push", bitbucketPush, "refs/heads/main", "bitbucket.org/acme/web", true, false},
		{notificationv1alpha1.ReceiverGeneric, "", genericPush, "refs/heads/main", "git.example.com/acme/web", false, false},
		{notificationv1alpha1.ReceiverGitHub, "pull_request", githubPullRequest, "refs/heads/main", "github.com/acme/web", true, true},
		{notificationv1alpha1.ReceiverGitea, "pull_request", giteaPullRequest, "refs/heads/main", "127.0.0.1/acme/web", true, true},
		{notificationv1alpha1.ReceiverGitLab, "Merge Request Hook", gitlabMergeRequest, "refs/heads/main", "gitlab.example.com/acme/web", true, true},
		{notificationv1alpha1.ReceiverBitbucket, "pullrequest:updated", bitbucketPullRequest, "refs/heads/main", "bitbucket.org/acme/web", true, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ)+" "+tt.event, func(t *testing.T) {
			r := signed(tt.typ, tt.event, tt.body, token)
			if err := Verify(tt.typ, r, token); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if err := Verify(tt.typ, r, "another-token"); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("Verify with another token = %v, want ErrUnauthorized", err)
			}
			tampered := Request{Header: r.Header, Body: append([]byte(" "), r.Body...)}
			if err := Verify(tt.typ, tampered, token); tt.typ != notificationv1alpha1.ReceiverGitLab && !errors.Is(err, ErrUnauthorized) {
				t.Errorf("Verify of a changed body = %v, want ErrUnauthorized", err)
			}
			if got := DeliveryID(tt.typ, r.Header); (got != "") != tt.delive {
				t.Errorf("DeliveryID = %q", got)
			}
			p, err := Parse(tt.typ, r)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var norm []string
			for _, u := range p.RepoURLs {
				norm = append(norm, NormalizeRepo(u))
			}
			if p.Ref != tt.ref || !slices.Contains(norm, tt.repo) || p.PullRequest != tt.pr {
				t.Errorf("Parse = %+v (normalized %v), want ref %s and repository %s", p, norm, tt.ref, tt.repo)
			}
		})
	}
}

func TestParseIgnoresOtherEvents(t *testing.T) {
	for typ, event := range map[notificationv1alpha1.ReceiverType]string{
		notificationv1alpha1.ReceiverGitHub:    "ping",
		notificationv1alpha1.ReceiverGitLab:    "Issue Hook",
		notificationv1alpha1.ReceiverGitea:     "issues",
		notificationv1alpha1.ReceiverBitbucket: "repo:fork",
	} {
		if _, err := Parse(typ, signed(typ, event, `{}`, "t")); !errors.Is(err, ErrIgnored) {
			t.Errorf("%s %s: Parse = %v, want ErrIgnored", typ, event, err)
		}
	}
	if _, err := Parse(notificationv1alpha1.ReceiverGeneric, Request{Body: []byte(`{"repository":"x","ref":"main"}`)}); err == nil {
		t.Error("a ref that is not a full ref was accepted")
	}
	if _, err := Parse(notificationv1alpha1.ReceiverGitHub, signed(notificationv1alpha1.ReceiverGitHub, "push", `{"ref":`, "t")); err == nil || errors.Is(err, ErrIgnored) {
		t.Errorf("a malformed body: %v", err)
	}
}

func TestVerifyRefusesMissingSignatures(t *testing.T) {
	for _, typ := range []notificationv1alpha1.ReceiverType{"github", "gitlab", "gitea", "bitbucket", "generic"} {
		if err := Verify(typ, Request{Header: http.Header{}, Body: []byte(genericPush)}, "t"); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s without a signature: %v", typ, err)
		}
		if err := Verify(typ, signed(typ, "push", genericPush, ""), ""); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s with an empty token: %v", typ, err)
		}
	}
}

func TestNormalizeRepo(t *testing.T) {
	want := "git.example.com/acme/web"
	for _, u := range []string{
		"https://git.example.com/acme/web.git", "https://git.example.com/acme/web", "http://GIT.example.com:8080/acme/web/",
		"ssh://git@git.example.com:2222/acme/web.git", "git@git.example.com:acme/web.git", "https://user:pw@git.example.com/acme/web.git",
	} {
		if got := NormalizeRepo(u); got != want {
			t.Errorf("NormalizeRepo(%q) = %q, want %q", u, got, want)
		}
	}
	if NormalizeRepo("https://git.example.com/acme/web") == NormalizeRepo("https://git.example.com/acme/web2") {
		t.Error("two repositories compare equal")
	}
}

// FuzzParse: no body of any type makes Parse panic, and what it accepts
// has a repository and a full ref.
func FuzzParse(f *testing.F) {
	for _, b := range []string{githubPush, gitlabPush, giteaPush, bitbucketPush, genericPush, `{"push":{"changes":[{"new":null}]}}`} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for typ, event := range map[notificationv1alpha1.ReceiverType]string{
			"github": "push", "gitlab": "Push Hook", "gitea": "push", "bitbucket": "repo:push", "generic": "",
		} {
			p, err := Parse(typ, signed(typ, event, body, "t"))
			if err == nil && (len(p.RepoURLs) == 0 || p.Ref == "") {
				t.Fatalf("%s accepted %q as %+v", typ, body, p)
			}
		}
	})
}
