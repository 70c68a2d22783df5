package artifact

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var testKey = Key{Kind: "program", Namespace: "default", Name: "web"}

// newStore returns a store in a temporary directory advertised at base.
func newStore(t *testing.T, base string) *Store {
	t.Helper()
	s, err := NewStore(filepath.Join(t.TempDir(), "artifacts"), base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pack packs a one-file program, failing the test on error.
func pack(t *testing.T, content string) []byte {
	t.Helper()
	data, err := Pack(map[string][]byte{"Pulumi.yaml": []byte(content)})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestNewStoreBaseURL(t *testing.T) {
	tests := []struct {
		base    string
		wantURL string
		wantErr bool
	}{
		{base: "http://stackyard.stackyard-system.svc.cluster.local:9090", wantURL: "http://stackyard.stackyard-system.svc.cluster.local:9090/program/default/web/1.tar.gz"},
		{base: "https://example.test/artifacts/", wantURL: "https://example.test/artifacts/program/default/web/1.tar.gz"},
		{base: "ftp://example.test", wantErr: true},
		{base: "/relative", wantErr: true},
		{base: "http://user:pw@example.test", wantErr: true},
		{base: "http://example.test/?q=1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			s, err := NewStore(t.TempDir(), tt.base)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewStore(%q) error = %v, want error %v", tt.base, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer s.Close()
			if got := s.URL(Path(testKey, "1")); got != tt.wantURL {
				t.Errorf("URL = %q, want %q", got, tt.wantURL)
			}
		})
	}
}

func TestPutGet(t *testing.T) {
	s := newStore(t, "http://artifacts.test")
	data := pack(t, "name: web\nruntime: yaml\n")
	want, size, _ := Digest(bytes.NewReader(data))

	if _, err := s.Get(testKey, "1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Put = %v, want ErrNotFound", err)
	}
	a, err := s.Put(testKey, "1", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if a.Path != "program/default/web/1.tar.gz" || a.URL != "http://artifacts.test/program/default/web/1.tar.gz" ||
		a.Revision != "1" || a.Digest != want || a.Size == nil || *a.Size != size || a.LastUpdateTime.IsZero() {
		t.Errorf("Put = %+v, want digest %s size %d", a, want, size)
	}
	onDisk, err := os.ReadFile(filepath.Join(s.Dir(), filepath.FromSlash(a.Path)))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("file on disk differs from the content (%v)", err)
	}
	got, err := s.Get(testKey, "1")
	if err != nil || got.Digest != a.Digest || got.URL != a.URL {
		t.Errorf("Get = %+v, %v; want %+v", got, err, a)
	}

	// Putting the same revision again replaces it atomically.
	data2 := pack(t, "name: web\nruntime: yaml\ndescription: two\n")
	a2, err := s.Put(testKey, "1", bytes.NewReader(data2))
	if err != nil || a2.Digest == a.Digest {
		t.Fatalf("second Put = %+v, %v; want a new digest", a2, err)
	}
	ents, _ := os.ReadDir(filepath.Join(s.Dir(), "program", "default", "web"))
	if len(ents) != 1 || ents[0].Name() != "1.tar.gz" {
		t.Errorf("directory holds %v, want only 1.tar.gz (no temporary files)", ents)
	}
}

func TestPutRejectsBadKeys(t *testing.T) {
	s := newStore(t, "http://artifacts.test")
	for _, tt := range []struct {
		key Key
		rev string
	}{
		{key: Key{Kind: "program", Namespace: "..", Name: "x"}, rev: "1"},
		{key: testKey, rev: "../../escape"},
		{key: testKey, rev: ".tmp-x"},
	} {
		if _, err := s.Put(tt.key, tt.rev, strings.NewReader("x")); err == nil {
			t.Errorf("Put(%+v, %q) succeeded, want an error", tt.key, tt.rev)
		}
	}
}

func TestGarbageCollect(t *testing.T) {
	s := newStore(t, "http://artifacts.test")
	other := Key{Kind: "program", Namespace: "default", Name: "other"}
	for _, rev := range []string{"1", "2", "3", "4"} {
		if _, err := s.Put(testKey, rev, strings.NewReader(rev)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(other, "1", strings.NewReader("o")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Dir(), "program", "default", "web")
	stale, fresh := filepath.Join(dir, tempPrefix+"stale"), filepath.Join(dir, tempPrefix+"fresh")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTemp)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}

	removed, err := s.GarbageCollect(testKey, "4", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"1", "2"}) {
		t.Errorf("removed %v, want [1 2]", removed)
	}
	if revs, _ := s.Revisions(testKey); !slices.Equal(revs, []string{"3", "4"}) {
		t.Errorf("kept %v, want [3 4]", revs)
	}
	if revs, _ := s.Revisions(other); !slices.Equal(revs, []string{"1"}) {
		t.Errorf("another object's artifacts changed: %v", revs)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("a stale temporary file was kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("a fresh temporary file (a write in progress) was removed")
	}

	if err := s.Remove(testKey); err != nil {
		t.Fatal(err)
	}
	if revs, _ := s.Revisions(testKey); len(revs) != 0 {
		t.Errorf("after Remove: %v", revs)
	}
	if err := s.Remove(testKey); err != nil {
		t.Errorf("removing twice: %v", err)
	}
	if revs, _ := s.Revisions(other); len(revs) != 1 {
		t.Errorf("Remove touched another object: %v", revs)
	}
}

func TestConcurrentPutAndCollect(t *testing.T) {
	s := newStore(t, "http://artifacts.test")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			rev := []string{"1", "2"}[i%2]
			if _, err := s.Put(testKey, rev, strings.NewReader(strings.Repeat(rev, 1000))); err != nil {
				t.Error(err)
			}
			if _, err := s.GarbageCollect(testKey, "1", "2"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if revs, _ := s.Revisions(testKey); !slices.Equal(revs, []string{"1", "2"}) {
		t.Errorf("revisions %v, want [1 2]", revs)
	}
}
