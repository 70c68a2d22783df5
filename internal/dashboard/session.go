package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/stackyard/stackyard/internal/authn"
)

// sessionCookie holds the signed-in user's token. It is HttpOnly (page
// scripts cannot read it), SameSite=Strict (other sites' pages cannot send
// it) and Secure when the dashboard is reached over https.
const sessionCookie = "stackyard_session"

// csrfField is the form field, and csrfHeader the header, that carry an
// action's CSRF token.
const (
	csrfField  = "_csrf"
	csrfHeader = "X-CSRF-Token"
)

// reviewTTL is how long a token's TokenReview, and an allowance of a
// SubjectAccessReview, is trusted before it is asked again (a refusal for
// a fifth of it, authn.CachedReviewer); a revoked token stops working
// within it.
const reviewTTL = 30 * time.Second

// session is who makes a request: the token it came with, who the API
// server says that is, and the CSRF token of the session.
type session struct {
	token string
	user  authenticationv1.UserInfo
	csrf  string
}

// csrfToken derives a session's CSRF token from its bearer token: an HMAC
// that a page of the dashboard embeds and another site cannot compute or
// read. It needs no server state, so it survives an operator restart, and
// it changes with the token.
func csrfToken(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("stackyard-dashboard-csrf"))
	return hex.EncodeToString(mac.Sum(nil))
}

// requestToken is the request's bearer token: the Authorization header
// (API clients, oauth2-proxy with --pass-authorization-header) or the
// session cookie of a sign-in.
func requestToken(r *http.Request) (string, error) {
	if len(r.Header.Values("Authorization")) > 0 {
		return authn.BearerToken(r)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", errors.New("not signed in")
	}
	return authn.CheckToken(c.Value)
}

// identify returns the request's session, or a 401 authn.Error.
func (s *Server) identify(r *http.Request) (*session, error) {
	token, err := requestToken(r)
	if err != nil {
		return nil, authn.Unauthorized(err.Error())
	}
	user, err := s.authenticate(r.Context(), token)
	if err != nil {
		return nil, err
	}
	return &session{token: token, user: user, csrf: csrfToken(token)}, nil
}

// authenticate answers from the review cache, or asks the API server.
func (s *Server) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	return s.reviewer.Authenticate(ctx, token)
}

// checkAction refuses an action that does not come from a page of the
// dashboard: its CSRF token must match the session's, and a browser's
// Origin (and Sec-Fetch-Site) must say it is this site.
func checkAction(r *http.Request, sess *session) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue(csrfField)
	}
	if got == "" || !hmac.Equal([]byte(got), []byte(sess.csrf)) {
		return &authn.Error{Code: http.StatusForbidden, Message: "the CSRF token is missing or wrong: reload the page and try again"}
	}
	return nil
}

// checkOrigin refuses a form posted from another site, as a browser's
// Origin and Sec-Fetch-Site headers tell it.
func checkOrigin(r *http.Request) error {
	forbidden := func(msg string) error { return &authn.Error{Code: http.StatusForbidden, Message: msg} }
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return forbidden("the request comes from another site (Origin " + origin + ")")
		}
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return forbidden("the request comes from another site (Sec-Fetch-Site " + site + ")")
	}
	return nil
}

// secureRequest reports whether the browser reached the dashboard over
// https, directly or through a proxy that says so.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// setSessionCookie signs the browser in with token.
func setSessionCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // HttpOnly and SameSite=Strict; Secure follows the request's scheme (stackyard dev serves plain HTTP on loopback)
		Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	})
}

// clearSessionCookie signs the browser out.
func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // HttpOnly and SameSite=Strict; Secure follows the request's scheme (stackyard dev serves plain HTTP on loopback)
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r),
	})
}
