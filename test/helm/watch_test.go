package helm_test

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackyard/stackyard/test/testenv"
)

// checkWatchNamespaces asserts what watchNamespaces={apps,infra} renders:
// the flag, the generated ClusterRole bound by a RoleBinding in each of
// them and nowhere cluster-wide, and its rules on cluster-scoped resources
// (which a RoleBinding cannot grant) in a ClusterRole of their own, bound
// cluster-wide. TestInstallUpgradeUninstall checks those rules against the
// API server's discovery.
func checkWatchNamespaces(t *testing.T, m manifest, o operator) {
	t.Helper()
	if o.flags["watch-namespaces"] != "apps,infra" {
		t.Errorf("--watch-namespaces=%q, want apps,infra", o.flags["watch-namespaces"])
	}
	var bound []string
	for _, u := range m.ofKind("RoleBinding") {
		var b rbacv1.RoleBinding
		fromUnstructured(t, u, &b)
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "stackyard-manager" {
			bound = append(bound, b.Namespace)
		}
	}
	slices.Sort(bound)
	if !slices.Equal(bound, []string{"apps", "infra"}) {
		t.Errorf("the ClusterRole stackyard-manager is bound in %v, want apps and infra", bound)
	}
	for _, u := range m.ofKind("ClusterRoleBinding") {
		if role, _, _ := unstructured.NestedString(u.Object, "roleRef", "name"); role == "stackyard-manager" {
			t.Errorf("ClusterRoleBinding %s binds stackyard-manager cluster-wide though watchNamespaces is set", u.GetName())
		}
	}
	if m.get("ClusterRoleBinding", "stackyard-cluster-scope") == nil {
		t.Error("no ClusterRoleBinding stackyard-cluster-scope: the TokenReviews and SubjectAccessReviews of the dashboard and the cloud API would be refused")
	}
	got := clusterScopeRules(t, m)
	if len(got) == 0 {
		t.Fatal("the ClusterRole stackyard-cluster-scope has no rules")
	}
	// Each is a part of a generated rule: the chart takes rights away from
	// the cluster-wide binding, it never adds any.
	generated := generatedRules(t)
	for _, r := range got {
		if !slices.ContainsFunc(generated, func(g rbacv1.PolicyRule) bool {
			return slices.Equal(g.APIGroups, r.APIGroups) && slices.Equal(g.Verbs, r.Verbs) &&
				!slices.ContainsFunc(r.Resources, func(res string) bool { return !slices.Contains(g.Resources, res) })
		}) {
			t.Errorf("stackyard-cluster-scope grants %+v, which no rule of config/rbac/role.yaml does", r)
		}
	}
}

// clusterScopeRules returns the rules of the rendered ClusterRole
// stackyard-cluster-scope, or none.
func clusterScopeRules(t *testing.T, m manifest) []rbacv1.PolicyRule {
	t.Helper()
	u := m.get("ClusterRole", "stackyard-cluster-scope")
	if u == nil {
		return nil
	}
	var role rbacv1.ClusterRole
	fromUnstructured(t, u, &role)
	return role.Rules
}

// generatedRules returns the rules of config/rbac/role.yaml.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.ClusterRole
	fromUnstructured(t, decodeFile(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))[0], &role)
	return role.Rules
}
