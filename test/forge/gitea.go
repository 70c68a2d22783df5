// Package forge runs Gitea, a real forge, on loopback for the tests that
// meet one: webhooks delivered by the forge itself, commit statuses, pull
// requests and their comments. GitHub, GitLab and Bitbucket cannot run
// here; their payloads and API calls are tested against their published
// documentation beside the code that handles them.
package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/testenv"
)

// Owner is the user that owns every repository of a Gitea the tests
// start, and whose token they act with.
const Owner = "stackyard"

// password is Owner's; the server listens on loopback only.
const password = "stackyard-forge-password-5e1a"

// Gitea is a running Gitea server with an administrator, Owner, and an
// API token of theirs.
type Gitea struct {
	// URL is the server's root, "http://127.0.0.1:PORT".
	URL string
	// Token is Owner's API token, with every scope the tests use
	// (administration included, to create users).
	Token string

	t      testing.TB
	daemon *testenv.Daemon
}

// StartGitea starts bin/gitea on a free loopback port, with SQLite in a
// temporary directory, and returns once its API answers as Owner. It is
// stopped when the test ends. Webhooks may be delivered to loopback
// addresses, which Gitea refuses by default.
func StartGitea(t testing.TB) *Gitea {
	t.Helper()
	return startGitea(t, testenv.FreeAddr)
}

// startGitea is StartGitea taking its addresses from addrs.
func startGitea(t testing.TB, addrs func(testing.TB) string) *Gitea {
	t.Helper()
	if err := testenv.RequireBinaries("gitea", "gitea-static/.version"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g := &Gitea{t: t}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "app.ini")
	env := giteaEnv(dir)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(testenv.BinDir(), "gitea"), append(args, "--config", conf, "--work-path", dir)...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gitea %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// configure points Gitea at addr.
	configure := func(addr string) {
		t.Helper()
		host, port, _ := strings.Cut(addr, ":")
		g.URL = "http://" + addr
		ini := fmt.Sprintf(giteaINI, me.Username, dir, filepath.Join(testenv.BinDir(), "gitea-static"), host, port, g.URL)
		if err := os.WriteFile(conf, []byte(ini), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Setting Gitea up listens nowhere: the address comes at its start.
	configure("127.0.0.1:0")
	run("migrate")
	run("admin", "user", "create", "--admin", "--username", Owner, "--password", password,
		"--email", Owner+"@example.invalid", "--must-change-password=false")
	// Gitea does not exit when its port was taken; StartListeningFrom
	// notices and starts it again elsewhere.
	g.daemon, _ = testenv.StartListeningFrom(t, 1, addrs, func(a []string) (*testenv.Daemon, error) {
		configure(a[0])
		d := testenv.StartDaemon(t, "gitea", []string{"web", "--config", conf, "--work-path", dir}, env)
		return d, d.AwaitHTTP(g.URL+"/api/v1/version", func(status int) bool { return status == http.StatusOK }, time.Minute)
	})

	var token struct {
		SHA1 string `json:"sha1"`
	}
	g.do(http.MethodPost, "/api/v1/users/"+Owner+"/tokens", map[string]any{
		"name": "tests", "scopes": []string{"write:repository", "write:issue", "write:user", "write:admin"},
	}, &token, func(r *http.Request) { r.SetBasicAuth(Owner, password) })
	g.Token = token.SHA1
	return g
}

// giteaEnv is the environment Gitea runs in: its own HOME and git
// configuration under dir, and leave to run as root, as the test machines
// do.
func giteaEnv(dir string) []string {
	return []string{
		"HOME=" + dir, "GITEA_WORK_DIR=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + filepath.Join(dir, "gitconfig"),
		"GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT=true",
	}
}

// giteaINI is Gitea's configuration: the run user, the work directory,
// the static directory, the host, the port and the root URL go in, in
// that order. No mail, no SSH, no indexers, no cron; queues in memory, so
// that a webhook is delivered at once.
const giteaINI = `APP_NAME = stackyard tests
RUN_MODE = prod
RUN_USER = %[1]s
WORK_PATH = %[2]s

[server]
PROTOCOL = http
STATIC_ROOT_PATH = %[3]s
HTTP_ADDR = %[4]s
HTTP_PORT = %[5]s
ROOT_URL = %[6]s/
APP_DATA_PATH = %[2]s/data
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = %[2]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[2]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = stackyard-forge-secret-key-0b9c4f2e7d1a
INTERNAL_TOKEN = eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJuYmYiOjE3MDAwMDAwMDB9.c3RhY2t5YXJkLWZvcmdlLWludGVybmFs

[oauth2]
ENABLED = false

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[queue]
TYPE = channel

[indexer]
REPO_INDEXER_ENABLED = false
ISSUE_INDEXER_TYPE = db

[cron]
ENABLED = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[log]
MODE = console
LEVEL = Warn
ROOT_PATH = %[2]s/log
`

// do calls the API: method on path (under URL), with body as JSON when
// not nil, decoding the answer into out when not nil, and fails the test
// on anything but a 2xx. It authenticates with Token, or as the
// authenticate functions say.
func (g *Gitea) do(method, path string, body, out any, authenticate ...func(*http.Request)) {
	g.t.Helper()
	if err := g.Call(method, path, body, out, authenticate...); err != nil {
		g.t.Fatal(err)
	}
}

// Call is do, returning the error instead of failing the test, for
// callers that poll.
func (g *Gitea) Call(method, path string, body, out any, authenticate ...func(*http.Request)) error {
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		in = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.URL+path, in)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if len(authenticate) == 0 {
		req.Header.Set("Authorization", "token "+g.Token)
	}
	for _, a := range authenticate {
		a(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("gitea %s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("gitea %s %s: decoding %s: %w", method, path, data, err)
		}
	}
	return nil
}

// CreateRepo creates an empty public repository of Owner and returns its
// clone URL.
func (g *Gitea) CreateRepo(name string) string {
	g.t.Helper()
	var repo struct {
		CloneURL string `json:"clone_url"`
	}
	g.do(http.MethodPost, "/api/v1/user/repos", map[string]any{"name": name, "default_branch": "main", "private": false}, &repo)
	return repo.CloneURL
}

// PushURL is the URL that pushes to repository name of Owner, as Owner.
func (g *Gitea) PushURL(name string) string { return g.userURL(Owner, Owner, name) }

// userURL is the URL of repository name of owner, authenticated as user.
func (g *Gitea) userURL(user, owner, name string) string {
	return strings.Replace(g.URL, "http://", "http://"+user+":"+password+"@", 1) + "/" + owner + "/" + name + ".git"
}

// AddWebhook makes repository name deliver events (push,
// pull_request, ...) to url, signed with secret, as Gitea's own webhook
// type does.
func (g *Gitea) AddWebhook(name, url, secret string, events ...string) {
	g.t.Helper()
	g.do(http.MethodPost, "/api/v1/repos/"+Owner+"/"+name+"/hooks", map[string]any{
		"type":   "gitea",
		"active": true,
		"events": events,
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, nil)
}

// HookDelivery is what Gitea recorded of one webhook delivery.
type HookDelivery struct {
	UUID      string `json:"uuid"`
	Delivered bool   `json:"is_delivered"`
	Succeeded bool   `json:"is_succeed"`
	Response  struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"response"`
}

// CommitStatus is one status of a commit, as Gitea's API shows it.
type CommitStatus struct {
	Context     string `json:"context"`
	State       string `json:"status"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// Statuses returns the statuses of commit sha of repository name, the
// newest first.
func (g *Gitea) Statuses(name, sha string) ([]CommitStatus, error) {
	var out []CommitStatus
	err := g.Call(http.MethodGet, "/api/v1/repos/"+Owner+"/"+name+"/statuses/"+sha, nil, &out)
	return out, err
}

// WaitBranch waits until Gitea has processed a push of sha to branch of
// repository name (its hooks run after the push returns), failing the
// test after a minute.
func (g *Gitea) WaitBranch(name, branch, sha string) {
	g.t.Helper()
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var b struct {
			Commit struct {
				ID string `json:"id"`
			} `json:"commit"`
		}
		if last = g.Call(http.MethodGet, "/api/v1/repos/"+Owner+"/"+name+"/branches/"+branch, nil, &b); last == nil {
			if b.Commit.ID == sha {
				return
			}
			last = fmt.Errorf("branch %s is at %s", branch, b.Commit.ID)
		}
	}
	g.t.Fatalf("Gitea did not show %s on branch %s of %s: %v", sha, branch, name, last)
}

// User is another user of the forge, with an API token of theirs.
type User struct {
	// Name is the user's login.
	Name string
	// Token is their API token.
	Token string

	g *Gitea
}

// CreateUser creates a user who is not an administrator.
func (g *Gitea) CreateUser(name string) *User {
	g.t.Helper()
	g.do(http.MethodPost, "/api/v1/admin/users", map[string]any{
		"username": name, "password": password, "email": name + "@example.invalid", "must_change_password": false,
	}, nil)
	var token struct {
		SHA1 string `json:"sha1"`
	}
	g.do(http.MethodPost, "/api/v1/users/"+name+"/tokens", map[string]any{
		"name": "tests", "scopes": []string{"write:repository", "write:issue", "write:user"},
	}, &token, func(r *http.Request) { r.SetBasicAuth(name, password) })
	return &User{Name: name, Token: token.SHA1, g: g}
}

// as authenticates a request as u.
func (u *User) as(r *http.Request) { r.Header.Set("Authorization", "token "+u.Token) }

// Fork forks repository name of Owner into u's account.
func (u *User) Fork(name string) {
	u.g.t.Helper()
	u.g.do(http.MethodPost, "/api/v1/repos/"+Owner+"/"+name+"/forks", map[string]any{}, nil, u.as)
}

// PushURL is the URL that pushes to u's fork of repository name.
func (u *User) PushURL(name string) string { return u.g.userURL(u.Name, u.Name, name) }

// OpenPullRequest opens a pull request of head ("branch", or
// "user:branch" from a fork) into base of repository name of Owner, as
// Owner, and returns its number.
func (g *Gitea) OpenPullRequest(name, head, base, title string) int64 {
	g.t.Helper()
	return g.openPullRequest(name, head, base, title)
}

// OpenPullRequest opens a pull request as u.
func (u *User) OpenPullRequest(name, head, base, title string) int64 {
	u.g.t.Helper()
	return u.g.openPullRequest(name, head, base, title, u.as)
}

func (g *Gitea) openPullRequest(name, head, base, title string, authenticate ...func(*http.Request)) int64 {
	g.t.Helper()
	var pr struct {
		Number int64 `json:"number"`
	}
	g.do(http.MethodPost, "/api/v1/repos/"+Owner+"/"+name+"/pulls", map[string]any{"head": head, "base": base, "title": title}, &pr, authenticate...)
	return pr.Number
}

// ClosePullRequest closes pull request number of repository name.
func (g *Gitea) ClosePullRequest(name string, number int64) {
	g.t.Helper()
	g.do(http.MethodPatch, fmt.Sprintf("/api/v1/repos/%s/%s/pulls/%d", Owner, name, number), map[string]any{"state": "closed"}, nil)
}

// Comment is a comment on a pull request.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// Comments lists the comments of pull request number of repository name.
func (g *Gitea) Comments(name string, number int64) ([]Comment, error) {
	var out []Comment
	err := g.Call(http.MethodGet, fmt.Sprintf("/api/v1/repos/%s/%s/issues/%d/comments", Owner, name, number), nil, &out)
	return out, err
}
