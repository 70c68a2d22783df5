package dashboard

import (
	"context"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// accessTTL is how long an answer about a user's read rights is reused.
const accessTTL = reviewTTL

// kind is a resource the dashboard shows, as RBAC names it.
type kind struct{ group, resource string }

// The kinds whose list right opens a view.
var (
	stacksKind     = kind{"pulumi.com", "stacks"}
	updatesKind    = kind{"auto.pulumi.com", "updates"}
	pipelinesKind  = kind{"promotion.stackyard.dev", "pipelines"}
	stagesKind     = kind{"promotion.stackyard.dev", "stages"}
	promotionsKind = kind{"promotion.stackyard.dev", "promotions"}
)

// mayList reports whether the session's user may list k in namespace ns
// ("" for every namespace).
func (s *Server) mayList(ctx context.Context, sess *session, k kind, ns string) (bool, error) {
	u := sess.user
	key := accessKey(sess, k, ns)
	if allowed, ok := s.access.get(key, s.now()); ok {
		return allowed, nil
	}
	allowed, err := s.reviewer.Allowed(ctx, u, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "list", Group: k.group, Resource: k.resource,
	})
	if err != nil {
		return false, err
	}
	s.access.put(key, allowed, s.now())
	return allowed, nil
}

// accessKey identifies a question about read rights: everything the
// SubjectAccessReview is sent (user, UID, groups, extra) and asked.
func accessKey(sess *session, k kind, ns string) string {
	u := sess.user
	parts := []string{u.Username, u.UID, k.group, k.resource, ns}
	parts = append(parts, u.Groups...)
	extras := make([]string, 0, len(u.Extra))
	for name, values := range u.Extra {
		extras = append(extras, name+"="+strings.Join(values, "\x01"))
	}
	slices.Sort(extras)
	parts = append(parts, "\x02")
	return strings.Join(append(parts, extras...), "\x00")
}

// readable returns, of the namespaces given, those where the session's user
// may list k, sorted: all of them when the user may list k cluster-wide.
func (s *Server) readable(ctx context.Context, sess *session, k kind, namespaces []string) ([]string, error) {
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	if ok, err := s.mayList(ctx, sess, k, ""); err != nil || ok {
		return namespaces, err
	}
	var out []string
	for _, ns := range namespaces {
		ok, err := s.mayList(ctx, sess, k, ns)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ns)
		}
	}
	return out, nil
}
