package s3server

import (
	"context"
	"net/http"
	"slices"
	"testing"
)

// TestServer runs versitygw and checks what the Stack tests rely on: a
// request signed with the account's keys is served, one signed with the
// wrong secret key or an unknown key ID is refused, and an unsigned one is
// refused too.
func TestServer(t *testing.T) {
	ctx := context.Background()
	creds := Credentials{AccessKeyID: "AKIASERVERTEST", SecretAccessKey: "server-test-secret-key"}
	s := Start(t, creds)

	if err := s.CreateBucket(ctx, "state"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "state", "dir/a b.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "state", "top.txt", []byte("world")); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(ctx, "state")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"dir/a b.txt", "top.txt"}) {
		t.Errorf("keys = %q", keys)
	}
	resp, err := s.Do(ctx, creds, http.MethodGet, "/state/dir/a b.txt", "", nil)
	if err != nil || resp.Status != http.StatusOK || string(resp.Body) != "hello" {
		t.Errorf("GET object: %d %q, %v", resp.Status, resp.Body, err)
	}

	// The signature itself is checked: the right key ID with the wrong
	// secret key is refused as S3 refuses it.
	resp, err = s.Do(ctx, Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: "not-the-secret"}, http.MethodGet, "/state/top.txt", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusForbidden || resp.Code() != "SignatureDoesNotMatch" {
		t.Errorf("wrong secret key: answered %d %s (%s), want 403 SignatureDoesNotMatch", resp.Status, resp.Code(), resp.Body)
	}
	// An unknown key ID is refused too (versitygw answers 404
	// XAdminUserNotFound where S3 answers 403 InvalidAccessKeyId).
	resp, err = s.Do(ctx, Credentials{AccessKeyID: "AKIAUNKNOWN", SecretAccessKey: creds.SecretAccessKey}, http.MethodGet, "/state/top.txt", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status/100 != 4 || resp.Code() == "" {
		t.Errorf("unknown key ID: answered %d %q, want a 4xx S3 error", resp.Status, resp.Body)
	}
	unsigned, err := http.Get(s.URL() + "/state/top.txt")
	if err != nil {
		t.Fatal(err)
	}
	_ = unsigned.Body.Close()
	if unsigned.StatusCode != http.StatusForbidden {
		t.Errorf("an unsigned GET answered %s", unsigned.Status)
	}
}
