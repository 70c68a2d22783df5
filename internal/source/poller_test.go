package source

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/gitserver"
)

// countingServer is a git server that accepts any (or no) credentials and
// counts the requests it receives, per HTTP basic username. One LsRemote is
// one request (GET info/refs).
type countingServer struct {
	*gitserver.Server
	mu     sync.Mutex
	byUser map[string]int
	total  atomic.Int64
}

// newCountingServer starts a counting git server for the test.
func newCountingServer(t testing.TB) *countingServer {
	c := &countingServer{Server: gitserver.New(t), byUser: map[string]int{}}
	c.SetAuthFunc(func(user, _ string, _ bool) bool {
		c.mu.Lock()
		c.byUser[user]++
		c.mu.Unlock()
		c.total.Add(1)
		return true
	})
	return c
}

// requests returns how many requests user made.
func (c *countingServer) requests(user string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byUser[user]
}

func TestPollerSharesConcurrentQueries(t *testing.T) {
	srv := newCountingServer(t)
	repo := srv.CreateRepo("app")
	head := repo.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
	p := NewPoller()

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			got, err := p.Latest(context.Background(), repo.URL, "main", nil, time.Minute)
			if err != nil || got != head {
				t.Errorf("Latest = %q, %v; want %s", got, err, head)
			}
		})
	}
	wg.Wait()
	if n := srv.total.Load(); n != 1 {
		t.Errorf("50 concurrent callers made %d remote queries, want 1", n)
	}
	// Within maxAge every later caller is answered from the shared result.
	for range 10 {
		if got, err := p.Latest(context.Background(), repo.URL, "main", nil, time.Minute); err != nil || got != head {
			t.Fatalf("Latest = %q, %v", got, err)
		}
	}
	if n := srv.total.Load(); n != 1 {
		t.Errorf("%d remote queries after cached calls, want 1", n)
	}
}

func TestPollerSeparatesCredentials(t *testing.T) {
	srv := newCountingServer(t)
	repo := srv.CreateRepo("app")
	head := repo.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
	p := NewPoller()
	ctx := context.Background()
	// The URL form of credentials is keyed like the others.
	withUser := strings.Replace(repo.URL, "http://", "http://carol:pw@", 1)

	calls := []struct {
		url  string
		auth *GitAuth
	}{
		{url: repo.URL, auth: &GitAuth{Username: "alice", Password: "a-secret"}},
		{url: repo.URL, auth: &GitAuth{Username: "bob", Password: "b-secret"}},
		{url: repo.URL, auth: &GitAuth{Username: "alice", Password: "another"}},
		{url: repo.URL, auth: nil},
		{url: withUser, auth: nil},
	}
	for round := range 3 {
		for _, c := range calls {
			if got, err := p.Latest(ctx, c.url, "main", c.auth, time.Minute); err != nil || got != head {
				t.Fatalf("round %d: Latest(%+v) = %q, %v", round, c.auth, got, err)
			}
		}
	}
	for user, want := range map[string]int{"alice": 2, "bob": 1, "": 1, "carol": 1} {
		if got := srv.requests(user); got != want {
			t.Errorf("user %q: %d remote queries, want %d (one per distinct credentials)", user, got, want)
		}
	}
}

func TestPollerRequeriesAfterMaxAge(t *testing.T) {
	srv := newCountingServer(t)
	repo := srv.CreateRepo("app")
	first := repo.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
	p := NewPoller()
	// The poller's clock, moved by the test: the ages are exact, whatever
	// the machine's load.
	var clock atomic.Int64
	clock.Store(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC).UnixNano())
	p.now = func() time.Time { return time.Unix(0, clock.Load()) }
	ctx := context.Background()
	const maxAge = time.Minute

	if got, err := p.Latest(ctx, repo.URL, "main", nil, maxAge); err != nil || got != first {
		t.Fatalf("Latest = %q, %v; want %s", got, err, first)
	}
	second := repo.Commit("main", map[string]string{"version.txt": "2"})
	if got, _ := p.Latest(ctx, repo.URL, "main", nil, maxAge); got != first {
		t.Errorf("within maxAge: Latest = %q, want the cached %s", got, first)
	}
	if n := srv.total.Load(); n != 1 {
		t.Fatalf("%d queries within maxAge, want 1", n)
	}
	clock.Add(int64(maxAge - time.Second))
	if got, _ := p.Latest(ctx, repo.URL, "main", nil, maxAge); got != first || srv.total.Load() != 1 {
		t.Errorf("a second before maxAge: Latest = %q after %d queries, want the cached %s after 1", got, srv.total.Load(), first)
	}
	clock.Add(int64(2 * time.Second))
	if got, err := p.Latest(ctx, repo.URL, "main", nil, maxAge); err != nil || got != second {
		t.Errorf("after maxAge: Latest = %q, %v; want the new commit %s", got, err, second)
	}
	if n := srv.total.Load(); n != 2 {
		t.Errorf("%d queries after maxAge, want 2", n)
	}
	// A caller that accepts nothing older than now queries again, once
	// any time has passed.
	clock.Add(int64(time.Millisecond))
	if _, err := p.Latest(ctx, repo.URL, "main", nil, 0); err != nil {
		t.Fatal(err)
	}
	if n := srv.total.Load(); n != 3 {
		t.Errorf("%d queries with maxAge 0, want 3", n)
	}
}

func TestPollerSharesFailures(t *testing.T) {
	srv := newCountingServer(t)
	repo := srv.CreateRepo("app")
	repo.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
	p := NewPoller()
	for range 5 {
		_, err := p.Latest(context.Background(), repo.URL, "no-such-branch", nil, time.Minute)
		wantReason(t, err, ReasonNotFound)
	}
	if n := srv.total.Load(); n != 1 {
		t.Errorf("a missing branch was queried %d times, want 1", n)
	}
}

func TestPollerCallerContext(t *testing.T) {
	srv := newCountingServer(t)
	repo := srv.CreateRepo("app")
	head := repo.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
	p := NewPoller()
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	queryCtx := make(chan error, 2)
	p.lsRemote = func(ctx context.Context, url, ref string, auth *GitAuth) (string, error) {
		started <- struct{}{}
		<-release
		queryCtx <- ctx.Err()
		return LsRemote(ctx, url, ref, auth)
	}
	ctx, cancel := context.WithCancel(context.Background())
	impatient := make(chan error, 1)
	go func() {
		_, err := p.Latest(ctx, repo.URL, "main", nil, time.Minute)
		impatient <- err
	}()
	<-started // the first caller's query is in flight
	cancel()
	if err := <-impatient; err != context.Canceled {
		t.Errorf("cancelled caller got %v, want context.Canceled", err)
	}
	// Another caller, while the query is still held: it joins the flight
	// (or, scheduled after it, reads its result).
	patient := make(chan string, 1)
	go func() {
		got, _ := p.Latest(context.Background(), repo.URL, "main", nil, time.Minute)
		patient <- got
	}()
	close(release)
	if err := <-queryCtx; err != nil {
		t.Errorf("the query's context ended with its first caller's: %v", err)
	}
	if got := <-patient; got != head {
		t.Errorf("the other caller got %q, want %s: one caller's cancellation must not fail the shared query", got, head)
	}
	if n := srv.total.Load(); n != 1 {
		t.Errorf("%d queries, want 1", n)
	}
}

func TestPollerKeyHidesCredentials(t *testing.T) {
	p := NewPoller()
	secrets := []string{"tok3n-value", "passw0rd-value", "url-passw0rd", "-----BEGIN KEY-----"}
	k := p.key("https://bob:url-passw0rd@git.example/org/app.git", "main", &GitAuth{
		Token: "tok3n-value", Password: "passw0rd-value", SSHPrivateKey: "-----BEGIN KEY-----",
	})
	for _, s := range secrets {
		if strings.Contains(fmt.Sprintf("%+v %s", k, k.String()), s) {
			t.Errorf("the poll key %s contains a secret", k)
		}
	}
	if k.repo != "https://git.example/org/app.git" {
		t.Errorf("key repo = %q, want the URL without user info", k.repo)
	}
	tests := []struct {
		name string
		a, b *GitAuth
		same bool
	}{
		{name: "none", a: nil, b: nil, same: true},
		{name: "same token", a: &GitAuth{Token: "x"}, b: &GitAuth{Token: "x"}, same: true},
		{name: "token vs none", a: &GitAuth{Token: "x"}, b: nil},
		{name: "empty auth vs none", a: &GitAuth{}, b: nil},
		{name: "fields do not run together", a: &GitAuth{Username: "ab", Password: "c"}, b: &GitAuth{Username: "a", Password: "bc"}},
		{name: "app installation", a: &GitAuth{GitHubApp: &GitHubApp{AppID: "1", InstallationID: 2}}, b: &GitAuth{GitHubApp: &GitHubApp{AppID: "1", InstallationID: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := p.key("https://git.example/app.git", "main", tt.a), p.key("https://git.example/app.git", "main", tt.b)
			if (ka == kb) != tt.same {
				t.Errorf("keys equal = %v, want %v", ka == kb, tt.same)
			}
		})
	}
}

// BenchmarkPollerShared polls 1,000 stacks spread over 10 repositories, all
// at once, with a fresh Poller per round: each round must cost 10 remote
// queries, reported as queries/op.
func BenchmarkPollerShared(b *testing.B) {
	const stacks, repos = 1000, 10
	srv := newCountingServer(b)
	urls := make([]string, repos)
	heads := make([]string, repos)
	for i := range repos {
		r := srv.CreateRepo(fmt.Sprintf("app%d", i))
		heads[i] = r.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
		urls[i] = r.URL
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p := NewPoller()
		var wg sync.WaitGroup
		for s := range stacks {
			wg.Go(func() {
				if got, err := p.Latest(context.Background(), urls[s%repos], "main", nil, time.Minute); err != nil || got != heads[s%repos] {
					b.Errorf("stack %d: Latest = %q, %v", s, got, err)
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	perRound := float64(srv.total.Load()) / float64(b.N)
	b.ReportMetric(perRound, "queries/op")
	if perRound != repos {
		b.Errorf("%.1f remote queries per round of %d stacks, want %d", perRound, stacks, repos)
	}
}
