package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush pushes a layout of one image to a registry on loopback (the
// registry of go-containerregistry, which speaks the distribution API)
// and reads it back by the digest push printed; a layout of two images,
// or none, is refused with a message naming it.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")

	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()

	var out bytes.Buffer
	ref := host + "/platform/stackyard:v1.2.3"
	if err := push(&out, dir, ref, true, authn.NewMultiKeychain()); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != ref+"@"+want.String() {
		t.Errorf("printed %q, want %s@%s", got, ref, want)
	}
	digestRef, err := name.NewDigest(host+"/platform/stackyard@"+want.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(digestRef)
	if err != nil {
		t.Fatalf("the registry does not hold the digest pushed: %v", err)
	}
	if got, _ := pulled.Digest(); got != want {
		t.Errorf("pulled %s, want %s", got, want)
	}

	// Two images in one layout: which one is meant?
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if err := push(&out, dir, ref, true, authn.NewMultiKeychain()); err == nil || !strings.Contains(err.Error(), "holds 2 images") {
		t.Errorf("a layout of two images: %v", err)
	}
	if err := push(&out, t.TempDir(), ref, true, authn.NewMultiKeychain()); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("no layout: %v", err)
	}
	if err := push(&out, dir, "Not A Reference", true, authn.NewMultiKeychain()); err == nil || !strings.Contains(err.Error(), "Not A Reference") {
		t.Errorf("a bad reference: %v", err)
	}
}
