package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// OperatorRoles are the operator's roles as packaged in config/rbac: the
// ClusterRole `make generate` writes and the namespaced leader-election Role.
func OperatorRoles() []string {
	dir := filepath.Join(RepoRoot(), "config", "rbac")
	return []string{filepath.Join(dir, "role.yaml"), filepath.Join(dir, "leader_election_role.yaml")}
}

// ServiceAccountConfig returns a config that acts as the ServiceAccount
// namespace/name, created here with its namespace and bound to the roles
// read from roleFiles (a ClusterRole cluster-wide, a Role in namespace) and
// to nothing else. An operator started with it has exactly the rights its
// packaged RBAC grants, so a missing rule fails the tests the way it would
// fail in a cluster.
func (e *Env) ServiceAccountConfig(ctx context.Context, namespace, name string, roleFiles ...string) (*rest.Config, error) {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
	for _, file := range roleFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			var role rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(data, &role); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			role.Name = namespace + ":" + name + ":" + role.Name
			objs = append(objs, &role, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   subjects,
			})
		case "Role":
			var role rbacv1.Role
			if err := yaml.UnmarshalStrict(data, &role); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			role.Namespace = namespace
			objs = append(objs, &role, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   subjects,
			})
		default:
			return nil, fmt.Errorf("%s: kind %q is neither ClusterRole nor Role", file, meta.Kind)
		}
	}
	for _, obj := range objs {
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg, nil
}

// UserToken creates, with c, the ServiceAccount namespace/name with a Role
// of rules in its namespace, and returns a token for it (valid an hour)
// from the TokenRequest API: a user as a dashboard, the CLI or an API
// client presents itself, judged by the real RBAC.
func UserToken(ctx context.Context, c client.Client, namespace, name string, rules ...rbacv1.PolicyRule) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	objs := []client.Object{
		sa,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		},
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("creating %T %s: %w", obj, name, err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// TokenClient is a client of the API server authenticated only by a
// bearer token of the new ServiceAccount namespace/name, which holds rules
// in namespace (UserToken): no impersonation, no client certificate.
func (e *Env) TokenClient(ctx context.Context, namespace, name string, rules ...rbacv1.PolicyRule) (client.Client, error) {
	token, err := UserToken(ctx, e.Client, namespace, name, rules...)
	if err != nil {
		return nil, err
	}
	return client.New(e.TokenConfig(token), client.Options{Scheme: e.Scheme})
}

// Impersonate grants the user name, in namespace, the rules (a Role and a
// RoleBinding named after them) and returns a config that acts as them,
// members of groups, through impersonation.
func (e *Env) Impersonate(ctx context.Context, namespace, name string, groups []string, rules ...rbacv1.PolicyRule) (*rest.Config, error) {
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
		},
	} {
		if err := e.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", obj, name, err)
		}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: groups}
	return cfg, nil
}

// PeopleRolesFile holds the roles for people that kustomize and the Helm
// chart install.
func PeopleRolesFile() string { return filepath.Join(RepoRoot(), "config", "people", "roles.yaml") }

// InstallPeopleRoles creates the ClusterRoles of PeopleRolesFile, as an
// install does; ones that exist already are left as they are.
func (e *Env) InstallPeopleRoles(ctx context.Context) error {
	data, err := os.ReadFile(PeopleRolesFile())
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
			return fmt.Errorf("%s: %w", PeopleRolesFile(), err)
		}
		if role.Name == "" {
			continue
		}
		if err := e.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
		}
	}
	return nil
}

// BoundToken creates, with c, the ServiceAccount saNamespace/name (unless
// it exists) and a RoleBinding of the same name in namespace to the
// ClusterRole role, and returns a token for the ServiceAccount (valid an
// hour) from the TokenRequest API: a person or a GitOps controller holding
// one of the shipped roles, judged by the real RBAC.
func BoundToken(ctx context.Context, c client.Client, saNamespace, name, namespace, role string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNamespace, Name: name}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: name}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %T %s: %w", obj, name, err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", saNamespace, name, err)
	}
	return tr.Status.Token, nil
}

// TokenConfig is a config that reaches the API server with token alone:
// no impersonation, no client certificate.
func (e *Env) TokenConfig(token string) *rest.Config {
	return &rest.Config{Host: e.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.CAData}}
}
