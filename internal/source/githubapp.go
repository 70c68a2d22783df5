package source

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultGitHubAPIURL is the API base used when GitHubApp.APIURL is empty.
const DefaultGitHubAPIURL = "https://api.github.com"

// GitHubApp holds the credentials of a GitHub App installation. A
// short-lived installation token is minted from them and used as the HTTP
// password for git.
type GitHubApp struct {
	// AppID is the App's numeric ID or client ID, the JWT issuer.
	AppID string
	// InstallationID is the ID of the App's installation that can read
	// the repository.
	InstallationID int64
	// PrivateKey is the App's PEM-encoded RSA private key (PKCS#1 or
	// PKCS#8).
	PrivateKey string
	// APIURL is the REST API base, e.g. "https://ghe.example.com/api/v3"
	// for GitHub Enterprise Server; empty means DefaultGitHubAPIURL.
	APIURL string
}

// appTokenMargin is how long before expiry a cached token is renewed, so a
// clone never starts with a token that lapses mid-way.
const appTokenMargin = 5 * time.Minute

// appTokenCache shares installation tokens across fetches and polls of the
// same installation, keyed by a hash of the credentials. GitHub tokens live
// an hour; minting one per poll would waste the App's rate limit.
var appTokenCache = struct {
	sync.Mutex
	tokens map[string]appToken
}{tokens: map[string]appToken{}}

// appToken is a cached installation token.
type appToken struct {
	token   string
	expires time.Time
}

// appHTTPClient performs the token exchange.
var appHTTPClient = &http.Client{Timeout: 30 * time.Second}

// installationToken returns a valid installation token, from the cache or
// freshly minted.
func (a *GitHubApp) installationToken(ctx context.Context) (string, error) {
	if a.AppID == "" || a.InstallationID <= 0 || a.PrivateKey == "" {
		return "", newError(ReasonInvalidSpec, FieldGitHubApp, nil, "the app ID, the installation ID and the private key are all required")
	}
	key := a.cacheKey()
	appTokenCache.Lock()
	cached, ok := appTokenCache.tokens[key]
	appTokenCache.Unlock()
	if ok && time.Until(cached.expires) > appTokenMargin {
		return cached.token, nil
	}
	tok, err := a.mintToken(ctx)
	if err != nil {
		return "", err
	}
	appTokenCache.Lock()
	appTokenCache.tokens[key] = tok
	appTokenCache.Unlock()
	return tok.token, nil
}

// forget drops the cached token, so a token the git server rejected (for
// example revoked, or its installation's permissions changed) is not reused.
func (a *GitHubApp) forget() {
	appTokenCache.Lock()
	delete(appTokenCache.tokens, a.cacheKey())
	appTokenCache.Unlock()
}

// cacheKey identifies the credentials without keeping the key in memory
// twice.
func (a *GitHubApp) cacheKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s", a.apiURL(), a.AppID, a.InstallationID, a.PrivateKey)
	return hex.EncodeToString(h.Sum(nil))
}

// apiURL returns the API base without a trailing slash.
func (a *GitHubApp) apiURL() string {
	if a.APIURL == "" {
		return DefaultGitHubAPIURL
	}
	return strings.TrimRight(a.APIURL, "/")
}

// mintToken signs an App JWT and exchanges it for an installation token.
func (a *GitHubApp) mintToken(ctx context.Context) (appToken, error) {
	jwt, err := a.signJWT(time.Now())
	if err != nil {
		return appToken{}, err
	}
	url := a.apiURL() + "/app/installations/" + strconv.FormatInt(a.InstallationID, 10) + "/access_tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return appToken{}, newError(ReasonInvalidSpec, FieldGitHubAPIURL, nil, "%q is not a valid URL", a.APIURL)
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := appHTTPClient.Do(req)
	if err != nil {
		return appToken{}, newError(ReasonUnreachable, FieldGitHubAPIURL, err, "requesting a GitHub App installation token from %s: %v", a.apiURL(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return appToken{}, appStatusError(resp.StatusCode, body, a)
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Token == "" {
		return appToken{}, newError(ReasonUnreachable, FieldGitHubApp, err, "GitHub App token response from %s has no token", a.apiURL())
	}
	if out.ExpiresAt.IsZero() {
		out.ExpiresAt = time.Now().Add(time.Hour)
	}
	return appToken{token: out.Token, expires: out.ExpiresAt}, nil
}

// appStatusError maps a failed token exchange to a Reason, quoting only
// GitHub's short "message" field.
func appStatusError(status int, body []byte, a *GitHubApp) *Error {
	var msg struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &msg)
	detail := fmt.Sprintf("HTTP %d", status)
	if msg.Message != "" {
		m := msg.Message
		if len(m) > 200 {
			m = m[:200]
		}
		detail += ": " + m
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return newError(ReasonAuthFailed, FieldGitHubApp, nil, "the credentials of app %s were rejected (%s)", a.AppID, detail)
	case status == http.StatusNotFound:
		e := newError(ReasonNotFound, FieldGitHubAppInstallationID, nil, "app %[2]s has no installation %[1]d (%[3]s)", a.InstallationID, a.AppID, detail)
		e.Permanent = true
		return e
	default:
		return newError(ReasonUnreachable, FieldGitHubApp, nil, "the token exchange at %s failed (%s)", a.apiURL(), detail)
	}
}

// signJWT returns an RS256 JSON Web Token asserting the App's identity, as
// GitHub requires for App-level API calls. It is backdated a minute to
// tolerate clock skew and lives well under GitHub's ten-minute ceiling.
func (a *GitHubApp) signJWT(now time.Time) (string, error) {
	key, err := parseRSAKey(a.PrivateKey)
	if err != nil {
		return "", err
	}
	header := []byte(`{"alg":"RS256","typ":"JWT"}`)
	claims, err := json.Marshal(map[string]any{
		"iat": now.Add(-time.Minute).Unix(),
		"exp": now.Add(9 * time.Minute).Unix(),
		"iss": a.AppID,
	})
	if err != nil {
		return "", newError(ReasonInternal, FieldGitHubApp, err, "encoding JWT claims: %v", err)
	}
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", newError(ReasonInternal, FieldGitHubApp, err, "signing the JWT failed")
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// parseRSAKey decodes a PEM RSA private key in PKCS#1 or PKCS#8 form.
// Errors never quote the key.
func parseRSAKey(pemText string) (*rsa.PrivateKey, error) {
	bad := newError(ReasonInvalidSpec, FieldGitHubAppPrivateKey, nil, "not a PEM-encoded RSA private key")
	block, _ := pem.Decode(bytes.TrimSpace([]byte(pemText)))
	if block == nil {
		return nil, bad
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, bad
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, bad
	}
	return rk, nil
}
