package dashboard

import (
	"context"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// kind is a resource the dashboard shows, as RBAC names it.
type kind struct{ group, resource string }

// The kinds whose list right opens a view.
var (
	stacksKind     = kind{"pulumi.com", "stacks"}
	updatesKind    = kind{"auto.pulumi.com", "updates"}
	stagesKind     = kind{"promotion.stackyard.dev", "stages"}
	promotionsKind = kind{"promotion.stackyard.dev", "promotions"}
)

// mayList reports whether the session's user may list k in namespace ns
// ("" for every namespace).
func (s *Server) mayList(ctx context.Context, sess *session, k kind, ns string) (bool, error) {
	return s.reviewer.Allowed(ctx, sess.user, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "list", Group: k.group, Resource: k.resource,
	})
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
