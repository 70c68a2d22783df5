package testenv

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterScopedRules returns the parts of rules that grant rights on
// cluster-scoped resources (TokenReviews, Namespaces, ...), as the API
// server behind mapper scopes them: the rights a RoleBinding cannot grant,
// which an operator watching some namespaces still needs bound
// cluster-wide. A subresource ("serviceaccounts/token") has its parent's
// scope. A resource the API server does not serve is an error, not a
// guess: install its CRDs first.
func ClusterScopedRules(mapper meta.RESTMapper, rules []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, error) {
	var out []rbacv1.PolicyRule
	for _, rule := range rules {
		var resources []string
		for _, resource := range rule.Resources {
			base, _, _ := strings.Cut(resource, "/")
			clusterScoped := false
			for _, group := range rule.APIGroups {
				gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: group, Resource: base})
				if err != nil {
					return nil, fmt.Errorf("the API server does not serve %s in group %q: %w", base, group, err)
				}
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					return nil, err
				}
				if mapping.Scope.Name() == meta.RESTScopeNameRoot {
					clusterScoped = true
				}
			}
			if clusterScoped {
				resources = append(resources, resource)
			}
		}
		if len(resources) > 0 {
			out = append(out, rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: resources, ResourceNames: rule.ResourceNames, Verbs: rule.Verbs})
		}
	}
	return out, nil
}
