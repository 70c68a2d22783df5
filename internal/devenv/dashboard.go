package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DashboardAdmin is the ServiceAccount (in namespace default) whose token
// signs the developer in to the local dashboard; it is bound to
// cluster-admin, which suits a throwaway local cluster only.
const DashboardAdmin = "stackyard-dev-admin"

// WriteDashboardToken makes sure DashboardAdmin exists with its binding,
// requests a token for it valid for a day, and writes it to
// <stateDir>/dashboard-token (mode 0600), whose path it returns.
func WriteDashboardToken(ctx context.Context, c client.Client, stateDir string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: DashboardAdmin}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: DashboardAdmin},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for %s: %w", DashboardAdmin, err)
	}
	path := filepath.Join(stateDir, "dashboard-token")
	if err := os.WriteFile(path, []byte(tr.Status.Token+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
