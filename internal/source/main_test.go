package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// TestMain isolates every git process (the test server's and any helper's)
// from the developer's configuration.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Setenv("GIT_TERMINAL_PROMPT", "0")
	os.Exit(m.Run())
}

// wantReason fails the test unless err is an *Error with the given reason,
// and returns it.
func wantReason(t *testing.T, err error, reason Reason) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error, got nil", reason)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *source.Error with reason %s, got %T: %v", reason, err, err)
	}
	if e.Reason != reason {
		t.Fatalf("want reason %s, got %s: %v", reason, e.Reason, err)
	}
	return e
}

// assertNoSecrets fails the test if any secret appears in err's text.
func assertNoSecrets(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		for _, text := range []string{err.Error(), strings.ReplaceAll(err.Error(), "\n", "")} {
			if s != "" && strings.Contains(text, s) {
				t.Fatalf("error leaks a secret: %v", err)
			}
		}
	}
}

// readFile returns the content of a file below dir, or fails the test.
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(b)
}

// siblings lists the entries of target's parent directory other than the
// target itself, to spot leftover staging directories.
func siblings(t *testing.T, target string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(target))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != filepath.Base(target) {
			out = append(out, e.Name())
		}
	}
	return out
}

// logSink collects log lines, at every verbosity, for secret checks.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

// String returns everything logged so far.
func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// loggingContext returns a context carrying a logger that records into the
// returned sink.
func loggingContext() (context.Context, *logSink) {
	sink := &logSink{}
	log := funcr.New(func(prefix, args string) {
		sink.mu.Lock()
		sink.lines = append(sink.lines, prefix+" "+args)
		sink.mu.Unlock()
	}, funcr.Options{Verbosity: 10})
	return logr.NewContext(context.Background(), log), sink
}
