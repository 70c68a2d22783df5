// Package s3server runs a real S3-compatible server on loopback for tests:
// versitygw (github.com/versity/versitygw), built by `make tools` into
// bin/, serving buckets from a temporary directory through its posix
// backend. It verifies every request's AWS Signature Version 4 against the
// one account it is started with, as S3 does, so a client holding the
// wrong secret key is refused.
//
// The package also signs requests itself (sigv4.go), to create buckets,
// put objects and list them without an S3 SDK in the main module.
package s3server

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/testenv"
)

// Binary is the name of the versitygw binary in testenv.BinDir().
const Binary = "versitygw"

// Region is the region the server says it is in; SigV4 signatures name it.
const Region = "us-east-1"

// startTimeout bounds how long the server may take to start serving.
const startTimeout = 30 * time.Second

// Server is a running versitygw. It is stopped, and its data removed, when
// the test that started it ends.
type Server struct {
	// Endpoint is the server's host:port on loopback, plain HTTP.
	Endpoint string
	// Credentials are the account every request must be signed with.
	Credentials Credentials

	client *http.Client
}

// Credentials are an S3 access key pair.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Start starts versitygw on a free loopback port with an empty posix root
// and the single account creds, and waits until it answers. The test fails
// with a message to run `make tools` when the binary is missing.
func Start(t testing.TB, creds Credentials) *Server {
	t.Helper()
	if err := testenv.RequireBinaries(Binary); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root, sidecar := filepath.Join(dir, "buckets"), filepath.Join(dir, "metadata")
	for _, d := range []string{root, sidecar} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{
		Credentials: creds,
		client:      &http.Client{Timeout: 30 * time.Second},
	}
	// The account is passed in the environment, not on the command line,
	// where any process on the machine could read the secret key. Object
	// metadata goes to a sidecar directory rather than extended
	// attributes, which not every file system holding a test's temporary
	// directory supports. It is started again on another port when its
	// port was taken before it bound it.
	_, addrs := testenv.StartListening(t, 1, func(addrs []string) (*testenv.Daemon, error) {
		daemon := testenv.StartDaemon(t, Binary,
			[]string{"--port", addrs[0], "--region", Region, "--quiet", "posix", "--sidecar", sidecar, root},
			[]string{"ROOT_ACCESS_KEY_ID=" + creds.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + creds.SecretAccessKey})
		// An unsigned request is refused with 403 once the server listens.
		return daemon, daemon.AwaitHTTP("http://"+addrs[0]+"/", func(status int) bool { return status == http.StatusForbidden }, startTimeout)
	})
	s.Endpoint = addrs[0]
	return s
}

// URL returns the server's base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://" + s.Endpoint }

// Response is what the server answered to a request.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Body is the response body; for an error, S3's XML error document.
	Body []byte
}

// Code returns the S3 error code of an error response ("AccessDenied",
// "SignatureDoesNotMatch", ...), or "" when the body holds none.
func (r Response) Code() string {
	var e struct {
		Code string `xml:"Code"`
	}
	if xml.Unmarshal(r.Body, &e) != nil {
		return ""
	}
	return e.Code
}

// Do sends a request for path (e.g. "/bucket/key", with query, if any,
// in query) signed with creds, and returns the server's answer.
func (s *Server) Do(ctx context.Context, creds Credentials, method, path, query string, body []byte) (Response, error) {
	u := s.URL() + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	sign(req, creds, Region, body, time.Now())
	resp, err := s.client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: data}, err
}

// do sends a request with the server's own credentials and fails unless
// it succeeds.
func (s *Server) do(ctx context.Context, method, path, query string, body []byte) ([]byte, error) {
	resp, err := s.Do(ctx, s.Credentials, method, path, query, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.Status/100 != 2 {
		return nil, fmt.Errorf("%s %s: status %d: %s", method, path, resp.Status, resp.Body)
	}
	return resp.Body, nil
}

// CreateBucket creates an empty bucket.
func (s *Server) CreateBucket(ctx context.Context, bucket string) error {
	_, err := s.do(ctx, http.MethodPut, "/"+bucket, "", nil)
	return err
}

// PutObject stores data under key in bucket.
func (s *Server) PutObject(ctx context.Context, bucket, key string, data []byte) error {
	_, err := s.do(ctx, http.MethodPut, "/"+bucket+"/"+key, "", data)
	return err
}

// Keys lists the keys of every object in bucket (ListObjectsV2, following
// continuation tokens).
func (s *Server) Keys(ctx context.Context, bucket string) ([]string, error) {
	var keys []string
	token := ""
	for {
		query := "list-type=2"
		if token != "" {
			query = "continuation-token=" + uriEncode(token, true) + "&" + query
		}
		body, err := s.do(ctx, http.MethodGet, "/"+bucket, query, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Contents []struct {
				Key string `xml:"Key"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		if err := xml.Unmarshal(body, &page); err != nil {
			return nil, fmt.Errorf("listing bucket %s: %w", bucket, err)
		}
		for _, c := range page.Contents {
			keys = append(keys, c.Key)
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return keys, nil
		}
		token = page.NextContinuationToken
	}
}
