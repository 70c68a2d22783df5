package cloudapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/redact"
)

// httpError is an answer other than 200: a status code, a message safe to
// show the caller and, for the log only, a detail.
type httpError struct {
	code   int
	msg    string
	detail string
}

func (e *httpError) Error() string { return e.msg }

// unauthorized is every 401, whatever the detail: the caller learns only
// that its credentials did not do.
func unauthorized(detail string) error {
	return &httpError{code: http.StatusUnauthorized, msg: "Unauthorized: no credentials provided or they are invalid", detail: detail}
}

// bearerToken returns the token of the request's Authorization header,
// "Bearer <token>" or Pulumi Cloud's "token <token>" (the scheme in any
// case), or an error saying what is wrong with it.
func bearerToken(r *http.Request) (string, error) {
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
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", errors.New("malformed token")
	}
	return token, nil
}

// authenticate asks the API server who token belongs to, with a TokenReview
// for the API server's own audience. A rejected token is a 401; a review
// that could not be made is a 500 or 503.
func (h *Handler) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := h.client.Create(ctx, tr); err != nil {
		return authenticationv1.UserInfo{}, reviewFailed("tokenreviews", err, token)
	}
	if !tr.Status.Authenticated {
		return authenticationv1.UserInfo{}, unauthorized("TokenReview: " + redact.New(token).Redact(tr.Status.Error))
	}
	return tr.Status.User, nil
}

// mayGet asks the API server, with a SubjectAccessReview, whether user may
// get the Stack.
func (h *Handler) mayGet(ctx context.Context, user authenticationv1.UserInfo, stack *pulumiv1.Stack) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(slices.Clone(v))
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: stack.Namespace, Name: stack.Name, Verb: "get",
			Group: pulumiv1.GroupVersion.Group, Version: pulumiv1.GroupVersion.Version, Resource: "stacks",
		},
	}}
	if err := h.client.Create(ctx, sar); err != nil {
		return false, reviewFailed("subjectaccessreviews", err, "")
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// reviewFailed turns a review request that failed into the caller's
// answer: 500 when the operator may not create reviews (its RBAC must be
// fixed), 503 otherwise.
func reviewFailed(resource string, err error, token string) error {
	detail := resource + ": " + redact.New(token).Redact(err.Error())
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &httpError{code: http.StatusInternalServerError,
			msg: "the operator may not create " + resource + "; check its ClusterRole", detail: detail}
	}
	return &httpError{code: http.StatusServiceUnavailable, msg: "the Kubernetes API server could not review the request", detail: detail}
}
