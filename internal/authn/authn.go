package authn

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/internal/redact"
)

// Error is an answer other than 200: a status code, a message safe to show
// the caller and, for the log only, a detail.
type Error struct {
	// Code is the HTTP status code.
	Code int
	// Message is what the caller is told.
	Message string
	// Detail is what only the log is told.
	Detail string
}

func (e *Error) Error() string { return e.Message }

// Unauthorized is every 401, whatever the detail: the caller learns only
// that its credentials did not do.
func Unauthorized(detail string) error {
	return &Error{Code: http.StatusUnauthorized, Message: "Unauthorized: no credentials provided or they are invalid", Detail: detail}
}

// BearerToken returns the token of the request's Authorization header,
// "Bearer <token>" or Pulumi Cloud's "token <token>" (the scheme in any
// case), or an error saying what is wrong with it.
func BearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", errors.New("no Authorization header")
	case 1:
	default:
		return "", errors.New("more than one Authorization header")
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "token") {
		return "", errors.New("the Authorization scheme is neither Bearer nor token")
	}
	return CheckToken(token)
}

// CheckToken trims a token and refuses one that is empty or has blanks
// inside.
func CheckToken(token string) (string, error) {
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", errors.New("malformed token")
	}
	return token, nil
}

// Reviewer asks the API server about callers.
type Reviewer struct {
	// Client creates the reviews (the operator's own client: its
	// ClusterRole grants create on tokenreviews and subjectaccessreviews).
	Client client.Client
}

// Authenticate asks the API server who token belongs to, with a
// TokenReview for the API server's own audience. A rejected token is a 401;
// a review that could not be made is a 500 or 503.
func (v Reviewer) Authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := v.Client.Create(ctx, tr); err != nil {
		return authenticationv1.UserInfo{}, ReviewFailed("tokenreviews", err, token)
	}
	if !tr.Status.Authenticated {
		return authenticationv1.UserInfo{}, Unauthorized("TokenReview: " + redact.New(token).Redact(tr.Status.Error))
	}
	return tr.Status.User, nil
}

// Allowed asks the API server, with a SubjectAccessReview, whether user
// may do what attrs say.
func (v Reviewer) Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, val := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(slices.Clone(val))
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra, ResourceAttributes: &attrs,
	}}
	if err := v.Client.Create(ctx, sar); err != nil {
		return false, ReviewFailed("subjectaccessreviews", err, "")
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// ReviewFailed turns a review request that failed into the caller's
// answer: 500 when the operator may not create reviews (its RBAC must be
// fixed), 503 otherwise. token, when set, is redacted from the detail.
func ReviewFailed(resource string, err error, token string) error {
	detail := resource + ": " + redact.New(token).Redact(err.Error())
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &Error{Code: http.StatusInternalServerError,
			Message: "the operator may not create " + resource + "; check its ClusterRole", Detail: detail}
	}
	return &Error{Code: http.StatusServiceUnavailable, Message: "the Kubernetes API server could not review the request", Detail: detail}
}
