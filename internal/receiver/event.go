// Package receiver serves the webhooks of Receivers
// (notification.stackyard.dev/v1alpha1): it checks that a request is signed
// with the Receiver's token the way its forge signs, reads which
// repository and ref were pushed, and wakes the Pipelines and
// branch-tracking Stacks of the Receiver's namespace that follow them.
//
// Parsing and verifying are pure functions of the request (this file);
// Handler adds the transport rules (body bound, replay refusal, rate
// limit, status codes); Waker finds and wakes the objects.
package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
)

// Push is what a verified request says was pushed.
type Push struct {
	// RepoURLs are the repository's URLs the payload gives (clone, SSH,
	// web); any of them may be what a Pipeline or Stack names.
	RepoURLs []string
	// Ref is the full ref pushed: refs/heads/<branch> or refs/tags/<tag>;
	// for a pull request, the branch it is into.
	Ref string
	// PullRequest says the event is of a pull request (opened, pushed to,
	// closed), not a push: it wakes the Pipelines that preview pull
	// requests into Ref, and nothing else.
	PullRequest bool
}

// Request is what Parse reads of an HTTP request.
type Request struct {
	// Header is the request's header.
	Header http.Header
	// Body is the request's body.
	Body []byte
}

// ErrUnauthorized is a request whose signature or token does not match.
var ErrUnauthorized = errors.New("the request is not signed with the Receiver's token")

// ErrIgnored is a verified request that asks for nothing (a ping, another
// event).
var ErrIgnored = errors.New("the event is neither a push nor a pull request's")

// Verify checks that r comes from who holds token, the way a forge of type
// typ proves it: an HMAC-SHA256 of the body (GitHub, Gitea, Bitbucket,
// generic) or the token itself in a header (GitLab), compared in constant
// time.
func Verify(typ notificationv1alpha1.ReceiverType, r Request, token string) error {
	if token == "" {
		return ErrUnauthorized
	}
	switch typ {
	case notificationv1alpha1.ReceiverGitLab:
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Gitlab-Token")), []byte(token)) == 1 {
			return nil
		}
		return ErrUnauthorized
	case notificationv1alpha1.ReceiverGitHub:
		return checkHMAC(r.Header.Get("X-Hub-Signature-256"), "sha256=", r.Body, token)
	case notificationv1alpha1.ReceiverGitea:
		sig := r.Header.Get("X-Gitea-Signature")
		if sig == "" {
			sig = r.Header.Get("X-Forgejo-Signature")
		}
		return checkHMAC(sig, "", r.Body, token)
	case notificationv1alpha1.ReceiverBitbucket:
		return checkHMAC(r.Header.Get("X-Hub-Signature"), "sha256=", r.Body, token)
	case notificationv1alpha1.ReceiverGeneric:
		return checkHMAC(r.Header.Get("X-Signature"), "sha256=", r.Body, token)
	}
	return fmt.Errorf("spec.type: unknown receiver type %q", typ)
}

// Sign returns the hex HMAC-SHA256 of body with token: the signature the
// HMAC types carry (with their prefix).
func Sign(body []byte, token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// checkHMAC compares header (prefix, then the hex HMAC) with the body's
// HMAC under token.
func checkHMAC(header, prefix string, body []byte, token string) error {
	got, ok := strings.CutPrefix(strings.TrimSpace(header), prefix)
	if !ok || got == "" {
		return ErrUnauthorized
	}
	want := Sign(body, token)
	if !hmac.Equal([]byte(strings.ToLower(got)), []byte(want)) {
		return ErrUnauthorized
	}
	return nil
}

// DeliveryID is the forge's id of the delivery, when it gives one: a
// request carrying an id already seen is a replay.
func DeliveryID(typ notificationv1alpha1.ReceiverType, h http.Header) string {
	switch typ {
	case notificationv1alpha1.ReceiverGitHub:
		return h.Get("X-GitHub-Delivery")
	case notificationv1alpha1.ReceiverGitea:
		if id := h.Get("X-Gitea-Delivery"); id != "" {
			return id
		}
		return h.Get("X-Forgejo-Delivery")
	case notificationv1alpha1.ReceiverGitLab:
		if id := h.Get("X-Gitlab-Event-UUID"); id != "" {
			return id
		}
		return h.Get("Idempotency-Key")
	case notificationv1alpha1.ReceiverBitbucket:
		return h.Get("X-Request-UUID")
	default:
		return h.Get("X-Delivery")
	}
}

// Parse reads the push, or the pull request event, a verified request of
// type typ announces. ErrIgnored is a request that announces neither (a
// ping, an issue); any other error is a malformed body.
func Parse(typ notificationv1alpha1.ReceiverType, r Request) (Push, error) {
	switch typ {
	case notificationv1alpha1.ReceiverGitHub:
		switch ev := r.Header.Get("X-GitHub-Event"); ev {
		case "push":
			return parseHubPush(r.Body)
		case "pull_request":
			return parseHubPullRequest(r.Body)
		default:
			return Push{}, fmt.Errorf("%w: X-GitHub-Event %q", ErrIgnored, ev)
		}
	case notificationv1alpha1.ReceiverGitea:
		ev := r.Header.Get("X-Gitea-Event")
		if ev == "" {
			ev = r.Header.Get("X-Forgejo-Event")
		}
		switch ev {
		case "push":
			return parseHubPush(r.Body)
		case "pull_request":
			return parseHubPullRequest(r.Body)
		default:
			return Push{}, fmt.Errorf("%w: X-Gitea-Event %q", ErrIgnored, ev)
		}
	case notificationv1alpha1.ReceiverGitLab:
		switch ev := r.Header.Get("X-Gitlab-Event"); ev {
		case "Push Hook", "Tag Push Hook":
			return parseGitLabPush(r.Body)
		case "Merge Request Hook":
			return parseGitLabMergeRequest(r.Body)
		default:
			return Push{}, fmt.Errorf("%w: X-Gitlab-Event %q", ErrIgnored, ev)
		}
	case notificationv1alpha1.ReceiverBitbucket:
		switch ev := r.Header.Get("X-Event-Key"); ev {
		case "repo:push":
			return parseBitbucketPush(r.Body)
		case "pullrequest:created", "pullrequest:updated", "pullrequest:fulfilled", "pullrequest:rejected":
			return parseBitbucketPullRequest(r.Body)
		default:
			return Push{}, fmt.Errorf("%w: X-Event-Key %q", ErrIgnored, ev)
		}
	case notificationv1alpha1.ReceiverGeneric:
		var p struct {
			Repository string `json:"repository"`
			Ref        string `json:"ref"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil {
			return Push{}, fmt.Errorf("reading the body: %w", err)
		}
		return checked(Push{RepoURLs: []string{p.Repository}, Ref: p.Ref})
	}
	return Push{}, fmt.Errorf("spec.type: unknown receiver type %q", typ)
}

// parseHubPush reads a push event of GitHub's shape, which Gitea and
// Forgejo share: ref, and the repository's clone_url, ssh_url, html_url.
func parseHubPush(body []byte) (Push, error) {
	var p struct {
		Ref        string `json:"ref"`
		Repository struct {
			CloneURL string `json:"clone_url"`
			SSHURL   string `json:"ssh_url"`
			HTMLURL  string `json:"html_url"`
			GitURL   string `json:"git_url"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("reading the body: %w", err)
	}
	r := p.Repository
	return checked(Push{RepoURLs: []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL}, Ref: p.Ref})
}

// parseHubPullRequest reads a pull_request event of GitHub's shape, which
// Gitea and Forgejo share: the branch it is into (pull_request.base.ref)
// and the repository's URLs.
func parseHubPullRequest(body []byte) (Push, error) {
	var p struct {
		PullRequest struct {
			Base struct {
				Ref string `json:"ref"`
			} `json:"base"`
		} `json:"pull_request"`
		Repository struct {
			CloneURL string `json:"clone_url"`
			SSHURL   string `json:"ssh_url"`
			HTMLURL  string `json:"html_url"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("reading the body: %w", err)
	}
	r := p.Repository
	return checkedPullRequest(Push{RepoURLs: []string{r.CloneURL, r.SSHURL, r.HTMLURL}, Ref: p.PullRequest.Base.Ref})
}

// parseGitLabMergeRequest reads a GitLab merge request event: the target
// branch and the target project's URLs.
func parseGitLabMergeRequest(body []byte) (Push, error) {
	var p struct {
		ObjectAttributes struct {
			TargetBranch string `json:"target_branch"`
			Target       struct {
				HTTPURL string `json:"git_http_url"`
				SSHURL  string `json:"git_ssh_url"`
				WebURL  string `json:"web_url"`
			} `json:"target"`
		} `json:"object_attributes"`
		Project struct {
			HTTPURL string `json:"git_http_url"`
			SSHURL  string `json:"git_ssh_url"`
			WebURL  string `json:"web_url"`
		} `json:"project"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("reading the body: %w", err)
	}
	t := p.ObjectAttributes.Target
	return checkedPullRequest(Push{
		RepoURLs: []string{t.HTTPURL, t.SSHURL, t.WebURL, p.Project.HTTPURL, p.Project.SSHURL, p.Project.WebURL},
		Ref:      p.ObjectAttributes.TargetBranch,
	})
}

// parseBitbucketPullRequest reads a Bitbucket Cloud pullrequest event:
// the destination branch and the repository's web link.
func parseBitbucketPullRequest(body []byte) (Push, error) {
	var p struct {
		PullRequest struct {
			Destination struct {
				Branch struct {
					Name string `json:"name"`
				} `json:"branch"`
			} `json:"destination"`
		} `json:"pullrequest"`
		Repository struct {
			Links struct {
				HTML struct {
					Href string `json:"href"`
				} `json:"html"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("reading the body: %w", err)
	}
	return checkedPullRequest(Push{RepoURLs: []string{p.Repository.Links.HTML.Href}, Ref: p.PullRequest.Destination.Branch.Name})
}

// checkedPullRequest makes p a pull request event into the branch its Ref
// names, then checks it as a push.
func checkedPullRequest(p Push) (Push, error) {
	if p.Ref == "" {
		return Push{}, errors.New("the body names no branch the pull request is into")
	}
	p.Ref, p.PullRequest = "refs/heads/"+p.Ref, true
	return checked(p)
}

// parseGitLabPush reads a GitLab push or tag push event: ref, and the
// project's git_http_url, git_ssh_url and web_url.
func parseGitLabPush(body []byte) (Push, error) {
	var p struct {
		Ref     string `json:"ref"`
		Project struct {
			HTTPURL string `json:"git_http_url"`
			SSHURL  string `json:"git_ssh_url"`
			WebURL  string `json:"web_url"`
		} `json:"project"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("reading the body: %w", err)
	}
	return checked(Push{RepoURLs: []string{p.Project.HTTPURL, p.Project.SSHURL, p.Project.WebURL}, Ref: p.Ref})
}

// parseBitbucketPush reads a Bitbucket Cloud repo:push event: the first
// change's new branch or tag, and the repository's web link.
func parseBitbucketPush(body []byte) (Push, error) {
	var p struct {
		Push struct {
			Changes []struct {
				New *struct {
					Type string `json:"type"`
					Name string `json:"name"`
				} `json:"new"`
			} `json:"changes"`
		} `json:"push"`
		Repository struct {
			FullName string `json:"full_name"`
			Links    struct {
				HTML struct {
					Href string `json:"href"`
				} `json:"html"`
			} `json:"links"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("reading the body: %w", err)
	}
	out := Push{RepoURLs: []string{p.Repository.Links.HTML.Href}}
	if fn := p.Repository.FullName; fn != "" {
		out.RepoURLs = append(out.RepoURLs, "https://bitbucket.org/"+fn, "git@bitbucket.org:"+fn)
	}
	for _, c := range p.Push.Changes {
		if c.New == nil {
			continue // a deleted branch
		}
		switch c.New.Type {
		case "branch":
			out.Ref = "refs/heads/" + c.New.Name
		case "tag", "annotated_tag":
			out.Ref = "refs/tags/" + c.New.Name
		}
		break
	}
	return checked(out)
}

// checked drops empty URLs and requires a repository and a full ref.
func checked(p Push) (Push, error) {
	var urls []string
	for _, u := range p.RepoURLs {
		if u != "" {
			urls = append(urls, u)
		}
	}
	p.RepoURLs = urls
	switch {
	case len(urls) == 0:
		return Push{}, errors.New("the body names no repository")
	case !strings.HasPrefix(p.Ref, "refs/heads/") && !strings.HasPrefix(p.Ref, "refs/tags/"):
		return Push{}, fmt.Errorf("the body's ref %q is neither refs/heads/… nor refs/tags/…", p.Ref)
	}
	return p, nil
}

// NormalizeRepo reduces a repository URL to host/path, so that the
// HTTPS, SSH (ssh:// and scp-like user@host:path) and web forms of one
// repository compare equal: no scheme, user, port, ".git" or trailing
// slash; the host in lower case.
func NormalizeRepo(raw string) string {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		// scp-like: [user@]host:path
		if at := strings.Index(s, "@"); at >= 0 {
			s = s[at+1:]
		}
		s = "ssh://" + strings.Replace(s, ":", "/", 1)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(raw, "/"), ".git"))
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	return strings.ToLower(u.Hostname()) + path
}
