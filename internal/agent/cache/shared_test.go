package cache

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/testenv"
)

// TestSharedCacheConcurrentInstalls: four agents' PULUMI_HOMEs linked to
// one cache, four real pulumi CLIs installing the same plugin at once from
// a plugin mirror (slow, to hold them all in the download): every install
// succeeds and the cache holds one whole copy of the plugin, nothing half
// written beside it.
func TestSharedCacheConcurrentInstalls(t *testing.T) {
	bin := filepath.Join(testenv.BinDir(), "pulumi-resource-stackyardtest")
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatalf("%v (make test builds it)", err)
	}
	const version = "0.0.7"
	tarball := pack(t, filepath.Base(bin), want)
	name := fmt.Sprintf("pulumi-resource-stackyardtest-v%s-%s-%s.tar.gz", version, runtime.GOOS, runtime.GOARCH)
	var fetches atomic.Int32
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path.Base(r.URL.Path) != name {
			http.NotFound(w, r)
			return
		}
		fetches.Add(1)
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Length", strconv.Itoa(len(tarball)))
		_, _ = w.Write(tarball)
	}))
	t.Cleanup(mirror.Close)

	root := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		home := filepath.Join(t.TempDir(), ".pulumi")
		if err := Link(home, root); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(filepath.Join(testenv.BinDir(), "pulumi"), "plugin", "install", "resource", "stackyardtest", version, "--server", mirror.URL, "--non-interactive")
			cmd.Env = append(os.Environ(), "PULUMI_HOME="+home, "PULUMI_SKIP_UPDATE_CHECK=true",
				"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("install %d: %v", i, err)
		}
	}
	entries, err := Entries(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name != "resource-stackyardtest-v"+version {
		t.Fatalf("entries %v, want the one plugin", entries)
	}
	got, err := os.ReadFile(filepath.Join(root, PluginsDir, entries[0].Name, filepath.Base(bin)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the cached plugin is not the mirror's (%v)", err)
	}
	des, _ := os.ReadDir(filepath.Join(root, PluginsDir))
	for _, de := range des {
		if n := de.Name(); n != entries[0].Name && !strings.HasSuffix(n, ".lock") {
			t.Errorf("left beside the plugin: %s", n)
		}
	}
	t.Logf("%d downloads for 4 concurrent installs", fetches.Load())
}

// pack returns a release tarball holding the file name with data.
func pack(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
