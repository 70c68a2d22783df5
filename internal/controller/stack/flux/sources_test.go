package flux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/internal/artifact"
	"github.com/stackyard/stackyard/test/s3server"
)

// This file holds what the real sources of the tests are fetched from:
// test/gitserver for a GitRepository, versitygw (test/s3server) for a
// Bucket, and an OCI registry for an OCIRepository. source-controller
// itself is always the real one (test/fluxsc).

// The media types of an artifact as Flux's own `flux push artifact` writes
// it: an OCI image manifest, an empty config of Flux's config type, and one
// layer, a tar.gz of the files.
const (
	ociManifestMediaType = "application/vnd.oci.image.manifest.v1+json"
	fluxConfigMediaType  = "application/vnd.cncf.flux.config.v1+json"
	fluxContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// ociRegistry serves an OCI registry on loopback and returns its host:port.
// It is go-containerregistry's registry (pkg/registry), an implementation
// of the OCI distribution API kept in memory: the content service here,
// while the client that pulls from it is source-controller's own. It needs
// no credentials, as a public registry does.
func ociRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushProgram pushes files as an OCI artifact to repository:tag on the
// registry at host, as `flux push artifact` lays one out (an empty config
// of Flux's config media type and one tar.gz layer), and returns the
// manifest's digest. It speaks the distribution API's push flow itself:
// POST then PUT for each blob, PUT for the manifest.
func pushProgram(t *testing.T, host, repository, tag string, files map[string][]byte) string {
	t.Helper()
	layer, err := artifact.Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	config := []byte("{}")
	descriptor := func(mediaType string, data []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": sha256Digest(data), "size": len(data)}
	}
	for _, blob := range [][]byte{config, layer} {
		resp := registryRequest(t, http.MethodPost, "http://"+host+"/v2/"+repository+"/blobs/uploads/", "", nil, http.StatusAccepted)
		upload, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		q := upload.Query()
		q.Set("digest", sha256Digest(blob))
		upload.RawQuery = q.Encode()
		registryRequest(t, http.MethodPut, "http://"+host+upload.String(), "application/octet-stream", blob, http.StatusCreated)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     ociManifestMediaType,
		"config":        descriptor(fluxConfigMediaType, config),
		"layers":        []any{descriptor(fluxContentMediaType, layer)},
	})
	if err != nil {
		t.Fatal(err)
	}
	registryRequest(t, http.MethodPut, "http://"+host+"/v2/"+repository+"/manifests/"+tag, ociManifestMediaType, manifest, http.StatusCreated)
	return sha256Digest(manifest)
}

// registryRequest sends a request to the registry and fails the test unless
// it answers with status want.
func registryRequest(t *testing.T, method, u, contentType string, body []byte, want int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s: %s", method, u, resp.Status, msg)
	}
	return resp
}

// sha256Digest returns the OCI digest of data.
func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// s3Bucket starts versitygw, creates bucket holding files, and creates in
// namespace the Secret a Bucket source reads its keys from (secretName)
// and one whose secret key is wrong (secretName-wrong).
func s3Bucket(t *testing.T, ns, bucket, secretName string, files map[string][]byte) *s3server.Server {
	t.Helper()
	ctx := context.Background()
	creds := s3server.Credentials{AccessKeyID: "AKIAFLUXBUCKET", SecretAccessKey: "flux-bucket-secret-key"}
	s3 := s3server.Start(t, creds)
	if err := s3.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	for key, data := range files {
		if err := s3.PutObject(ctx, bucket, key, data); err != nil {
			t.Fatal(err)
		}
	}
	for name, secret := range map[string]string{secretName: creds.SecretAccessKey, secretName + "-wrong": "not-the-secret-key"} {
		if err := env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			StringData: map[string]string{"accesskey": creds.AccessKeyID, "secretkey": secret},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return s3
}
