package authn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/stackyard/stackyard/internal/authn"
)

// TestCachedReviewer: answers are remembered for the TTL (a refusal for a
// fifth of it, a rejected token as long as a good one), failures not at
// all. The reviews' answers come from an interceptor: what is under test
// is the memory, not the API server (internal/cloudapi's suite runs that).
func TestCachedReviewer(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var tokens, access int
	fail := false
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if fail {
				return errors.New("connection refused")
			}
			switch r := obj.(type) {
			case *authenticationv1.TokenReview:
				tokens++
				r.Status.Authenticated = r.Spec.Token == "good"
				r.Status.User = authenticationv1.UserInfo{Username: "alice"}
			case *authorizationv1.SubjectAccessReview:
				access++
				r.Status.Allowed = r.Spec.ResourceAttributes.Name == "mine"
			}
			return nil
		},
	}).Build()
	cr := &authn.CachedReviewer{Reviewer: authn.Reviewer{Client: c}, Now: func() time.Time { return now }}
	ctx := t.Context()

	for range 3 {
		if u, err := cr.Authenticate(ctx, "good"); err != nil || u.Username != "alice" {
			t.Fatalf("good token: %v %v", u, err)
		}
		if _, err := cr.Authenticate(ctx, "bad"); err == nil {
			t.Fatal("bad token accepted")
		}
	}
	if tokens != 2 || !cr.Cached("good") || !cr.Cached("bad") || cr.Cached("other") {
		t.Fatalf("%d TokenReviews for two tokens asked three times each, want 2", tokens)
	}

	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}}
	mine := authorizationv1.ResourceAttributes{Verb: "get", Resource: "stacks", Name: "mine"}
	theirs := authorizationv1.ResourceAttributes{Verb: "get", Resource: "stacks", Name: "theirs"}
	ask := func(user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) bool {
		ok, err := cr.Allowed(ctx, user, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for range 3 {
		if !ask(alice, mine) || ask(alice, theirs) {
			t.Fatal("wrong answers")
		}
	}
	if access != 2 {
		t.Fatalf("%d SubjectAccessReviews, want 2", access)
	}
	// Another group is another user.
	ask(authenticationv1.UserInfo{Username: "alice", Groups: []string{"ops"}}, mine)
	if access != 3 {
		t.Fatalf("a user with other groups was answered from memory")
	}

	// Three seconds on: the refusal is asked again, the allowance not.
	now = now.Add(3 * time.Second)
	ask(alice, mine)
	ask(alice, theirs)
	if access != 4 {
		t.Fatalf("%d SubjectAccessReviews after 3 s, want 4 (the refusal again)", access)
	}
	// Past the TTL: everything is asked again.
	now = now.Add(authn.DefaultCacheTTL)
	if _, err := cr.Authenticate(ctx, "good"); err != nil || tokens != 3 {
		t.Fatalf("after the TTL: %d TokenReviews, %v", tokens, err)
	}
	// Refresh asks again, whatever is remembered, and remembers the
	// answer: the token revoked since is refused from then on.
	revoked := false
	c2 := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			r := obj.(*authenticationv1.TokenReview)
			r.Status.Authenticated = !revoked
			return nil
		},
	}).Build()
	cr2 := &authn.CachedReviewer{Reviewer: authn.Reviewer{Client: c2}, Now: func() time.Time { return now }}
	if _, err := cr2.Authenticate(ctx, "long-lived"); err != nil {
		t.Fatal(err)
	}
	revoked = true
	if _, err := cr2.Authenticate(ctx, "long-lived"); err != nil {
		t.Fatal("the remembered answer was not used")
	}
	if _, err := cr2.Refresh(ctx, "long-lived"); err == nil {
		t.Fatal("Refresh answered from memory")
	}
	if _, err := cr2.Authenticate(ctx, "long-lived"); err == nil {
		t.Fatal("Refresh did not remember the refusal")
	}
	// A review that fails is not remembered.
	fail = true
	if _, err := cr.Authenticate(ctx, "new"); err == nil {
		t.Fatal("a failed review answered")
	}
	if cr.Cached("new") {
		t.Error("a failed review was remembered")
	}
}
