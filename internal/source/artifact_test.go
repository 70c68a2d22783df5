package source

import (
	"archive/tar"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// artifactServer serves fixed bodies by path, plus /stream, which sends a
// body of unknown length, and /fail/<code>, which answers with that status.
func artifactServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/stream":
			for i := 0; i < 64; i++ {
				_, _ = w.Write(bytes.Repeat([]byte{'x'}, 1024))
				w.(http.Flusher).Flush()
			}
		case strings.HasPrefix(r.URL.Path, "/fail/"):
			code := 0
			for _, c := range strings.TrimPrefix(r.URL.Path, "/fail/") {
				code = code*10 + int(c-'0')
			}
			w.WriteHeader(code)
		default:
			b, ok := files[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(b)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchArtifact(t *testing.T) {
	good := gz(t, makeTar(t, withProgram(tarEntry{name: "lib", typ: tar.TypeSymlink, link: "infra"}, tarEntry{name: "copy.sh", typ: tar.TypeLink, link: "bin/run.sh"})...))
	srv := artifactServer(t, map[string][]byte{"/good.tar.gz": good})
	ctx := context.Background()

	for _, tt := range []struct {
		name, digest, dir string
	}{
		{name: "prefixed digest", digest: "sha256:" + sha256Hex(good)},
		{name: "bare digest", digest: sha256Hex(good)},
		{name: "upper-case digest", digest: "SHA256:" + strings.ToUpper(sha256Hex(good))},
		{name: "dir", digest: sha256Hex(good), dir: "infra"},
		{name: "dir through in-tree symlink", digest: sha256Hex(good), dir: "lib"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "src")
			res, err := FetchArtifact(ctx, target, ArtifactSpec{URL: srv.URL + "/good.tar.gz", Digest: tt.digest, Dir: tt.dir})
			if err != nil {
				t.Fatalf("FetchArtifact: %v", err)
			}
			if res.Digest != "sha256:"+sha256Hex(good) {
				t.Errorf("digest = %s", res.Digest)
			}
			if want := filepath.Join(target, tt.dir); res.Dir != want {
				t.Errorf("Dir = %s, want %s", res.Dir, want)
			}
			if got := readFile(t, target, "lib/Pulumi.yaml"); !strings.Contains(got, "infra") {
				t.Errorf("symlinked Pulumi.yaml = %q", got)
			}
			fi, err := os.Stat(filepath.Join(target, "copy.sh"))
			if err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("hard-linked executable: %v, %v", fi, err)
			}
			if left := siblings(t, target); len(left) != 0 {
				t.Errorf("leftovers beside target: %v", left)
			}
		})
	}
}

func TestFetchArtifactErrors(t *testing.T) {
	files := map[string][]byte{}
	add := func(name string, b []byte) (string, string) {
		files["/"+name] = b
		return "/" + name, sha256Hex(b)
	}
	goodPath, goodDigest := add("good.tar.gz", gz(t, makeTar(t, program...)))
	bigPath, bigDigest := add("big.tar.gz", bytes.Repeat([]byte{1}, 8<<10))
	bombPath, bombDigest := add("bomb.tar.gz", gz(t, makeTar(t, withProgram(tarEntry{name: "zeros", body: strings.Repeat("\x00", 4<<20)})...)))
	manyPath, manyDigest := add("many.tar.gz", gz(t, makeTar(t, withProgram(
		tarEntry{name: "a"}, tarEntry{name: "b"}, tarEntry{name: "c"}, tarEntry{name: "d"}, tarEntry{name: "e"})...)))
	notGzPath, notGzDigest := add("plain.tar", makeTar(t, program...))
	unsafeArchive := func(name string, e ...tarEntry) (string, string) {
		return add(name+".tar.gz", gz(t, makeTar(t, withProgram(e...)...)))
	}
	type tc struct {
		name   string
		path   string
		digest string
		dir    string
		lim    Limits
		reason Reason
		field  Field
		text   string
	}
	tests := []tc{
		{name: "digest mismatch", path: goodPath, digest: bigDigest, reason: ReasonDigestMismatch, field: "digest", text: "want sha256:" + bigDigest},
		{name: "missing digest", path: goodPath, reason: ReasonInvalidSpec, field: "digest"},
		{name: "malformed digest", path: goodPath, digest: "sha256:xyz", reason: ReasonInvalidSpec, field: "digest"},
		{name: "unknown algorithm", path: goodPath, digest: "md5:" + goodDigest[:32], reason: ReasonInvalidSpec, field: "digest"},
		{name: "oversize download", path: bigPath, digest: bigDigest, lim: Limits{MaxDownloadBytes: 4 << 10}, reason: ReasonTooLarge, text: "download limit"},
		{name: "oversize stream", path: "/stream", digest: bigDigest, lim: Limits{MaxDownloadBytes: 4 << 10}, reason: ReasonTooLarge, text: "download limit"},
		{name: "zip bomb", path: bombPath, digest: bombDigest, lim: Limits{MaxExtractedBytes: 1 << 20}, reason: ReasonTooLarge, text: "extracts to more than"},
		{name: "too many files", path: manyPath, digest: manyDigest, lim: Limits{MaxFiles: 6}, reason: ReasonTooLarge, text: "more than 6 entries"},
		{name: "not gzip", path: notGzPath, digest: notGzDigest, reason: ReasonUnsafeArchive, text: "not a valid tar.gz"},
		{name: "missing dir", path: goodPath, digest: goodDigest, dir: "nope", reason: ReasonNotFound, field: "dir", text: `dir: "nope": no such directory in artifact sha256:` + goodDigest},
		{name: "dir escapes", path: goodPath, digest: goodDigest, dir: "../x", reason: ReasonInvalidSpec, field: "dir"},
		{name: "not found", path: "/missing.tar.gz", digest: goodDigest, reason: ReasonNotFound, field: "url"},
		{name: "server error", path: "/fail/503", digest: goodDigest, reason: ReasonUnreachable, field: "url"},
		{name: "forbidden", path: "/fail/403", digest: goodDigest, reason: ReasonAuthFailed, field: "url"},
	}
	for _, u := range []struct {
		name string
		e    []tarEntry
		text string
	}{
		{"path escape", []tarEntry{{name: "../x", body: "evil"}}, "leaves the archive root"},
		{"nested path escape", []tarEntry{{name: "infra/../../x", body: "evil"}}, "leaves the archive root"},
		{"absolute path", []tarEntry{{name: "/tmp/stackyard-evil", body: "evil"}}, "absolute"},
		{"symlink out of tree", []tarEntry{{name: "infra/l", typ: tar.TypeSymlink, link: "../../etc"}}, "leaves the archive root"},
		{"absolute symlink", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, "absolute"},
		{"symlink escaping through a symlink", []tarEntry{{name: "s", typ: tar.TypeSymlink, link: "."}, {name: "l", typ: tar.TypeSymlink, link: "s/../x"}}, "leads outside"},
		{"write through escaping symlink", []tarEntry{{name: "s", typ: tar.TypeSymlink, link: "."}, {name: "l", typ: tar.TypeSymlink, link: "s/.."}, {name: "l/evil", body: "evil"}}, "cannot be written inside the tree"},
		{"hard link out of tree", []tarEntry{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}, "leaves the archive root"},
		{"hard link to symlink", []tarEntry{{name: "infra/l", typ: tar.TypeSymlink, link: "../Pulumi.yaml"}, {name: "h", typ: tar.TypeLink, link: "infra/l"}}, "not an earlier regular file"},
		{"character device", []tarEntry{{name: "dev", typ: tar.TypeChar}}, "device"},
		{"fifo", []tarEntry{{name: "fifo", typ: tar.TypeFifo}}, "device and FIFO"},
	} {
		p, d := unsafeArchive(strings.ReplaceAll(u.name, " ", "-"), u.e...)
		tests = append(tests, tc{name: u.name, path: p, digest: d, reason: ReasonUnsafeArchive, field: "url", text: u.text})
	}
	srv := artifactServer(t, files)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			target := filepath.Join(base, "a", "b", "src")
			_, err := FetchArtifact(context.Background(), target, ArtifactSpec{URL: srv.URL + tt.path, Digest: tt.digest, Dir: tt.dir, Limits: tt.lim})
			t.Logf("error: %v", err)
			e := wantReason(t, err, tt.reason)
			if tt.field != "" && e.Field != tt.field {
				t.Errorf("field = %q, want %q", e.Field, tt.field)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("message %q does not contain %q", err.Error(), tt.text)
			}
			if _, serr := os.Lstat(target); !os.IsNotExist(serr) {
				t.Errorf("target exists after failed fetch")
			}
			if left := siblings(t, target); len(left) != 0 {
				t.Errorf("leftovers beside target: %v", left)
			}
			for _, p := range []string{filepath.Join(base, "x"), filepath.Join(base, "a", "x"), filepath.Join(base, "a", "evil"), "/tmp/stackyard-evil"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("archive wrote outside the target: %s", p)
				}
			}
		})
	}
}

// TestFetchArtifactKeepsPrevious checks that a failure after part of the
// archive was unpacked leaves the previous content untouched.
func TestFetchArtifactKeepsPrevious(t *testing.T) {
	bad := gz(t, makeTar(t, withProgram(tarEntry{name: "../x", body: "evil"})...))
	srv := artifactServer(t, map[string][]byte{"/bad.tar.gz": bad})
	target := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "old.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FetchArtifact(context.Background(), target, ArtifactSpec{URL: srv.URL + "/bad.tar.gz", Digest: sha256Hex(bad)})
	wantReason(t, err, ReasonUnsafeArchive)
	if got := readFile(t, target, "old.txt"); got != "old" {
		t.Errorf("previous content changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(target, "Pulumi.yaml")); err == nil {
		t.Errorf("partial content reached the target")
	}
	if left := siblings(t, target); len(left) != 0 {
		t.Errorf("leftovers beside target: %v", left)
	}
}

func TestFetchArtifactSpecErrors(t *testing.T) {
	ctx := context.Background()
	digest := strings.Repeat("0", 64)
	for _, tt := range []struct {
		name, url string
		reason    Reason
	}{
		{"file URL", "file:///etc/passwd", ReasonInvalidSpec},
		{"no host", "http:///x.tar.gz", ReasonInvalidSpec},
		{"unreachable", "http://" + closedPort(t) + "/x.tar.gz", ReasonUnreachable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FetchArtifact(ctx, filepath.Join(t.TempDir(), "src"), ArtifactSpec{URL: tt.url, Digest: digest})
			wantReason(t, err, tt.reason)
		})
	}
	// Credentials in the URL never reach the message.
	srv := artifactServer(t, nil)
	url := strings.Replace(srv.URL, "http://", "http://user:hunter2-secret@", 1) + "/missing.tar.gz"
	_, err := FetchArtifact(ctx, filepath.Join(t.TempDir(), "src"), ArtifactSpec{URL: url, Digest: digest})
	wantReason(t, err, ReasonNotFound)
	assertNoSecrets(t, err, "hunter2-secret")
	_, err = FetchArtifact(ctx, filepath.Join(t.TempDir(), "src"), ArtifactSpec{URL: "http://user:hunter2-secret@" + closedPort(t) + "/x", Digest: digest})
	wantReason(t, err, ReasonUnreachable)
	assertNoSecrets(t, err, "hunter2-secret")
}
