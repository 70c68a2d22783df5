package source

import (
	"context"
	"errors"
	"net"
	neturl "net/url"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"golang.org/x/crypto/ssh/knownhosts"
)

// classifyGitError maps an error from go-git to an *Error whose Reason says
// what happens next. op describes the operation for the message; the
// cause's text is scrubbed of secrets.
func classifyGitError(err error, secrets redactor, op string) *Error {
	var keyErr *knownhosts.KeyError
	var herr *githttp.Err
	var uerr *plumbing.UnexpectedError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return secrets.wrap(ReasonUnreachable, FieldNone, err, op)
	case errors.As(err, &keyErr):
		if len(keyErr.Want) == 0 {
			return newError(ReasonAuthFailed, FieldKnownHosts, err, "%s: the server's SSH host key is not among the known hosts", op)
		}
		return newError(ReasonAuthFailed, FieldKnownHosts, err, "%s: the server's SSH host key does not match the known hosts (possible impersonation)", op)
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		strings.Contains(err.Error(), "unable to authenticate"):
		// The server's reply body is not quoted: some servers echo the
		// request, and the credentials are what is at fault anyway.
		return newError(ReasonAuthFailed, FieldAuth, err, "%s: credentials were rejected or are missing", op)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		e := newError(ReasonNotFound, FieldURL, err, "%s: repository not found (or the credentials cannot see it)", op)
		e.Permanent = true
		return e
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return newError(ReasonNotFound, FieldURL, err, "%s: repository has no commits", op)
	case errors.As(err, &herr):
		return newError(ReasonUnreachable, FieldURL, err, "%s: server answered HTTP %d", op, herr.StatusCode())
	case errors.As(err, &uerr) && errors.As(uerr.Err, &herr):
		return newError(ReasonUnreachable, FieldURL, err, "%s: server answered HTTP %d", op, herr.StatusCode())
	}
	return secrets.wrap(ReasonUnreachable, FieldURL, err, op)
}

// isTransportFailure reports whether err came from the connection or the
// credentials rather than from what the server said about the wanted
// objects, so a failed fetch of a SHA is not misreported as a missing
// commit.
func isTransportFailure(err error) bool {
	var nerr net.Error
	var oerr *net.OpError
	return errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, transport.ErrAuthenticationRequired) ||
		errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrRepositoryNotFound) ||
		errors.As(err, &nerr) || errors.As(err, &oerr)
}

// redactURL drops the password from a URL for messages. URLs url.Parse
// rejects lose their whole user-info part instead; scp-style addresses
// carry no password and are returned unchanged.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err == nil {
		if u.User == nil {
			return raw
		}
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	host := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host = rest[:i]
	}
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		return scheme + "://xxxxx@" + rest[at+1:]
	}
	return raw
}
