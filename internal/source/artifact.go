package source

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// ArtifactSpec says which tar.gz artifact to fetch, e.g. a Flux source's
// artifact or a Program's.
type ArtifactSpec struct {
	// URL is the http(s) address of the tar.gz.
	URL string
	// Digest is the expected digest, "sha256:<hex>" or bare sha256 hex;
	// "sha384:" and "sha512:" are accepted too. Required: an artifact is
	// never unpacked unverified.
	Digest string
	// Dir is the subdirectory holding Pulumi.yaml; empty means the root.
	Dir string
	// Limits caps download and extraction; zero fields take DefaultLimits.
	Limits Limits
}

// Limits bounds what an artifact may cost, so a hostile or broken source
// cannot fill the disk or exhaust inodes.
type Limits struct {
	// MaxDownloadBytes caps the compressed download.
	MaxDownloadBytes int64
	// MaxExtractedBytes caps the total size of extracted file contents.
	MaxExtractedBytes int64
	// MaxFiles caps the number of archive entries.
	MaxFiles int
}

// DefaultLimits are generous for Pulumi programs, vendored dependencies
// included, while keeping a runaway archive from hurting the node.
var DefaultLimits = Limits{
	MaxDownloadBytes:  256 << 20,
	MaxExtractedBytes: 1 << 30,
	MaxFiles:          100_000,
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	if l.MaxDownloadBytes <= 0 {
		l.MaxDownloadBytes = DefaultLimits.MaxDownloadBytes
	}
	if l.MaxExtractedBytes <= 0 {
		l.MaxExtractedBytes = DefaultLimits.MaxExtractedBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultLimits.MaxFiles
	}
	return l
}

// artifactHTTPClient downloads artifacts; the context bounds each fetch,
// the timeout is a backstop.
var artifactHTTPClient = &http.Client{Timeout: 15 * time.Minute}

// FetchArtifact downloads the tar.gz at spec.URL, verifies its digest and
// unpacks it safely into target. As with FetchGit, nothing reaches target
// unless every step succeeded.
func FetchArtifact(ctx context.Context, target string, spec ArtifactSpec) (*Result, error) {
	u, err := neturl.Parse(spec.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, newError(ReasonInvalidSpec, FieldURL, nil, "%q: must be an http or https URL", redactURL(spec.URL))
	}
	safeURL := u.Redacted()
	want, err := parseDigest(spec.Digest)
	if err != nil {
		return nil, err
	}
	sub, err := cleanSubdir(spec.Dir)
	if err != nil {
		return nil, err
	}
	lim := spec.Limits.withDefaults()
	err = place(target, func(dir string) error {
		archive, err := download(ctx, spec.URL, safeURL, want, lim, filepath.Dir(dir))
		if err != nil {
			return err
		}
		defer os.Remove(archive.Name())
		defer archive.Close()
		if err := extractTarGz(archive, dir, lim); err != nil {
			return err
		}
		return checkProgramDir(dir, sub, "artifact "+want.String())
	})
	if err != nil {
		return nil, err
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("fetched artifact", FieldURL, safeURL, "digest", want.String())
	return &Result{Digest: want.String(), Dir: programPath(target, sub)}, nil
}

// digest is an expected artifact digest.
type digest struct {
	algo string
	hex  string
	new  func() hash.Hash
}

// String returns the digest as "algo:hex".
func (d digest) String() string { return d.algo + ":" + d.hex }

// parseDigest accepts "algo:hex" for sha256, sha384 and sha512, and bare
// hex for sha256.
func parseDigest(s string) (digest, error) {
	if s == "" {
		return digest{}, newError(ReasonInvalidSpec, FieldDigest, nil, "required")
	}
	algo, hexPart, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	if !ok {
		algo, hexPart = "sha256", algo
	}
	d := digest{algo: algo, hex: hexPart}
	switch algo {
	case "sha256":
		d.new = sha256.New
	case "sha384":
		d.new = sha512.New384
	case "sha512":
		d.new = sha512.New
	default:
		return digest{}, newError(ReasonInvalidSpec, FieldDigest, nil, "%q: unsupported algorithm %q (use sha256, sha384 or sha512)", s, algo)
	}
	if b, err := hex.DecodeString(hexPart); err != nil || len(b) != d.new().Size() {
		return digest{}, newError(ReasonInvalidSpec, FieldDigest, nil, "%q: not a valid %s hex digest", s, algo)
	}
	return d, nil
}

// download fetches url into a temporary file in tmpDir, enforcing the
// download cap and checking the digest, and returns the file rewound.
func download(ctx context.Context, url, safeURL string, want digest, lim Limits, tmpDir string) (*os.File, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, newError(ReasonInvalidSpec, FieldURL, nil, "%q: not a valid URL", safeURL)
	}
	resp, err := artifactHTTPClient.Do(req)
	if err != nil {
		return nil, newError(ReasonUnreachable, FieldURL, err, "downloading %s: %v", safeURL, stripURLError(err))
	}
	defer resp.Body.Close()
	if err := statusError(resp.StatusCode, safeURL); err != nil {
		return nil, err
	}
	if resp.ContentLength > lim.MaxDownloadBytes {
		return nil, newError(ReasonTooLarge, FieldURL, nil, "artifact %s is %d bytes, over the %d-byte download limit", safeURL, resp.ContentLength, lim.MaxDownloadBytes)
	}
	f, err := os.CreateTemp(tmpDir, ".artifact-*.tar.gz")
	if err != nil {
		return nil, newError(ReasonInternal, FieldNone, err, "creating download file: %v", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := want.new()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, lim.MaxDownloadBytes+1))
	if err != nil {
		return nil, newError(ReasonUnreachable, FieldURL, err, "downloading %s: %v", safeURL, err)
	}
	if n > lim.MaxDownloadBytes {
		return nil, newError(ReasonTooLarge, FieldURL, nil, "artifact %s exceeds the %d-byte download limit", safeURL, lim.MaxDownloadBytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.hex {
		return nil, newError(ReasonDigestMismatch, FieldDigest, nil, "artifact %s has %s:%s, want %s", safeURL, want.algo, got, want)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, newError(ReasonInternal, FieldNone, err, "rewinding download: %v", err)
	}
	ok = true
	return f, nil
}

// statusError maps an HTTP status to an *Error, or nil for 200.
func statusError(status int, safeURL string) error {
	switch {
	case status == http.StatusOK:
		return nil
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return newError(ReasonAuthFailed, FieldURL, nil, "downloading %s: HTTP %d", safeURL, status)
	case status == http.StatusNotFound || status == http.StatusGone:
		// Transient: a source controller may have replaced the artifact
		// and will publish the new URL shortly.
		return newError(ReasonNotFound, FieldURL, nil, "downloading %s: HTTP %d, no such artifact", safeURL, status)
	case status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return newError(ReasonUnreachable, FieldURL, nil, "downloading %s: HTTP %d", safeURL, status)
	}
	return newError(ReasonUnreachable, FieldURL, nil, "downloading %s: unexpected HTTP %d", safeURL, status)
}

// stripURLError returns the text of err without the URL *url.Error puts in
// front, which may carry credentials; the caller prints a redacted URL.
func stripURLError(err error) string {
	var uerr *neturl.Error
	if errors.As(err, &uerr) {
		return fmt.Sprint(uerr.Err)
	}
	return err.Error()
}
