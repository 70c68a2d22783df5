package browser_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stackyard/stackyard/test/browser"
)

const harnessPage = `<!doctype html>
<html>
<head><meta charset="utf-8"><title>harness</title></head>
<body>
<button id="inc">Increment</button>
<p>Response: <span id="result"></span></p>
<p>Events: <span id="events"></span></p>
<script>
const es = new EventSource('/events');
es.onopen = () => { document.body.dataset.sse = 'open'; };
es.onmessage = (e) => { document.getElementById('events').textContent += e.data; };
document.getElementById('inc').addEventListener('click', async () => {
  const resp = await fetch('/api/increment', { method: 'POST', body: 'from the button' });
  document.getElementById('result').textContent = await resp.text();
});
</script>
</body>
</html>
`

// harnessServer serves harnessPage, counts the POSTs to /api/increment and,
// on /events, sends one server-sent event only after the first POST.
type harnessServer struct {
	mu      sync.Mutex
	posts   int
	bodies  []string
	clicked chan struct{} // closed by the first POST
	done    chan struct{} // closed when the test ends, to end open streams
	once    sync.Once
}

func newHarnessServer() *harnessServer {
	return &harnessServer{clicked: make(chan struct{}), done: make(chan struct{})}
}

func (s *harnessServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, harnessPage)
	case r.URL.Path == "/api/increment" && r.Method == http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.posts++
		n := s.posts
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		s.once.Do(func() { close(s.clicked) })
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "count=%d", n)
	case r.URL.Path == "/events" && r.Method == http.MethodGet:
		s.events(w, r)
	case r.URL.Path == "/favicon.ico":
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (s *harnessServer) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// A comment, so the headers go out now and the page's onopen fires.
	_, _ = io.WriteString(w, ": connected\n\n")
	if rc.Flush() != nil {
		return
	}
	select {
	case <-s.clicked:
	case <-r.Context().Done():
		return
	case <-s.done:
		return
	}
	s.mu.Lock()
	n := s.posts
	s.mu.Unlock()
	fmt.Fprintf(w, "data: server saw POST #%d\n\n", n)
	if rc.Flush() != nil {
		return
	}
	// Hold the stream open: a closed one makes EventSource reconnect.
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

func (s *harnessServer) start(t *testing.T) string {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.done) }) // runs before srv.Close
	return srv.URL
}

// TestHarness drives a page in Chromium: a fetch() POST from a button click
// and a server-sent event that the server sends only after that POST.
func TestHarness(t *testing.T) {
	s := newHarnessServer()
	url := s.start(t)

	browser.Run(t, "harness.spec.mjs", map[string]string{
		"BASE_URL":       url,
		"SCREENSHOT_DIR": t.TempDir(),
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.posts != 1 {
		t.Fatalf("server saw %d POSTs to /api/increment, want 1", s.posts)
	}
	if s.bodies[0] != "from the button" {
		t.Fatalf("POST body = %q, want %q", s.bodies[0], "from the button")
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, so a test can check that Run fails.
type fatalRecorder struct {
	*testing.T
	fatal string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestRunFailsWithStepAndScreenshot serves a page without the button: the
// spec must fail in its "click the button" step, Run must fail the test with
// the script's output, and step must leave a screenshot.
func TestRunFailsWithStepAndScreenshot(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><title>harness</title><body data-sse="open"><span id="events"></span></body>`)
	}))
	t.Cleanup(srv.Close)
	shots := t.TempDir()

	rec := &fatalRecorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		browser.Run(rec, "harness.spec.mjs", map[string]string{
			"BASE_URL":           srv.URL,
			"SCREENSHOT_DIR":     shots,
			"BROWSER_TIMEOUT_MS": "2000",
		})
	}()
	<-done

	if rec.fatal == "" {
		t.Fatal("Run did not fail for a spec whose step fails")
	}
	for _, want := range []string{"node harness.spec.mjs failed", "ok open the page", `step "click the button" failed`} {
		if !strings.Contains(rec.fatal, want) {
			t.Errorf("Run's failure does not contain %q:\n%s", want, rec.fatal)
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(shots, "*click_the_button.png"))
	if len(pngs) != 1 {
		entries, _ := os.ReadDir(shots)
		t.Fatalf("want one screenshot of the failed step in %s, have %v", shots, entries)
	}
	if fi, err := os.Stat(pngs[0]); err != nil || fi.Size() == 0 {
		t.Fatalf("screenshot %s is empty or unreadable: %v", pngs[0], err)
	}
}
