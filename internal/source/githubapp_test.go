package source

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/gitserver"
)

// fakeGitHubAPI is a loopback stand-in for GitHub's token exchange: it
// checks the App JWT's RS256 signature with the App's public key and its
// claims, and mints a fresh installation token per call.
type fakeGitHubAPI struct {
	pub            *rsa.PublicKey
	appID          string
	installationID string
	minted         atomic.Int32
	current        atomic.Value // string: the latest token
}

func (f *fakeGitHubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := "/api/v3/app/installations/" + f.installationID + "/access_tokens"
	if r.Method != http.MethodPost || r.URL.Path != want {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || f.verify(jwt) != nil {
		http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
		return
	}
	tok := "ghs_token" + strings.Repeat("x", int(f.minted.Add(1)))
	f.current.Store(tok)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": time.Now().Add(time.Hour)})
}

// verify checks the JWT's header, signature and claims.
func (f *fakeGitHubAPI) verify(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errString("not three parts")
	}
	enc := base64.RawURLEncoding
	var header struct{ Alg, Typ string }
	if b, err := enc.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &header) != nil || header.Alg != "RS256" {
		return errString("bad header")
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		return err
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(f.pub, crypto.SHA256, digest[:], sig); err != nil {
		return err
	}
	var claims struct {
		Iss      string
		Iat, Exp int64
	}
	b, err := enc.DecodeString(parts[1])
	if err != nil || json.Unmarshal(b, &claims) != nil {
		return errString("bad claims")
	}
	now := time.Now().Unix()
	if claims.Iss != f.appID || claims.Iat > now || claims.Exp <= now || claims.Exp-claims.Iat > 600 {
		return errString("claims out of bounds")
	}
	return nil
}

// errString is a minimal error for the fake's checks.
type errString string

func (e errString) Error() string { return string(e) }

func TestFetchGitGitHubApp(t *testing.T) {
	key := newRSAKey(t)
	api := &fakeGitHubAPI{pub: &key.PublicKey, appID: "123", installationID: "42"}
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)

	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	srv.SetAuthFunc(func(u, pw string, ok bool) bool {
		cur, _ := api.current.Load().(string)
		return ok && u == TokenUsername && cur != "" && pw == cur
	})
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	app := &GitHubApp{AppID: "123", InstallationID: 42, PrivateKey: pkcs1, APIURL: apiSrv.URL + "/api/v3/"}

	ctx := context.Background()
	res, err := FetchGit(ctx, filepath.Join(t.TempDir(), "src"), GitSpec{URL: p.repo.URL, Branch: "main", Auth: &GitAuth{GitHubApp: app}})
	if err != nil {
		t.Fatalf("FetchGit: %v", err)
	}
	if res.Commit != p.main {
		t.Errorf("commit = %s, want %s", res.Commit, p.main)
	}
	// A poll right after reuses the cached token instead of minting one.
	if _, err := LsRemote(ctx, p.repo.URL, "main", &GitAuth{GitHubApp: app}); err != nil {
		t.Fatalf("LsRemote: %v", err)
	}
	if n := api.minted.Load(); n != 1 {
		t.Errorf("minted %d tokens, want 1 (cached)", n)
	}

	// The same key in PKCS#8 form works as well.
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	app8 := *app
	app8.PrivateKey = pkcs8
	if _, err := LsRemote(ctx, p.repo.URL, "main", &GitAuth{GitHubApp: &app8}); err != nil {
		t.Fatalf("PKCS#8 key: %v", err)
	}

	other := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(newRSAKey(t))}))
	for _, tt := range []struct {
		name   string
		app    GitHubApp
		reason Reason
	}{
		{name: "key of another app", app: GitHubApp{AppID: "123", InstallationID: 42, PrivateKey: other, APIURL: app.APIURL}, reason: ReasonAuthFailed},
		{name: "wrong installation", app: GitHubApp{AppID: "123", InstallationID: 7, PrivateKey: pkcs1, APIURL: app.APIURL}, reason: ReasonNotFound},
		{name: "garbage key", app: GitHubApp{AppID: "123", InstallationID: 42, PrivateKey: "not a key at all", APIURL: app.APIURL}, reason: ReasonInvalidSpec},
		{name: "missing app ID", app: GitHubApp{InstallationID: 42, PrivateKey: pkcs1, APIURL: app.APIURL}, reason: ReasonInvalidSpec},
		{name: "API unreachable", app: GitHubApp{AppID: "123", InstallationID: 42, PrivateKey: pkcs1, APIURL: "http://" + closedPort(t)}, reason: ReasonUnreachable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FetchGit(ctx, filepath.Join(t.TempDir(), "src"), GitSpec{URL: p.repo.URL, Branch: "main", Auth: &GitAuth{GitHubApp: &tt.app}})
			t.Logf("error: %v", err)
			wantReason(t, err, tt.reason)
			assertNoSecrets(t, err, pkcs1, other, "ghs_token")
		})
	}
}

// newRSAKey returns a fresh 2048-bit RSA key.
func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
