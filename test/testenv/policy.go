package testenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/internal/devenv"
)

// PolicyDir holds the admission policies stackyard ships
// (ValidatingAdmissionPolicies and their bindings).
func PolicyDir() string { return filepath.Join(RepoRoot(), "config", "policy") }

// InstallPolicies applies the manifests in PolicyDir, as `kubectl apply
// -k config/policy` would, and returns once the API server enforces them,
// so that the tests meet them as a cluster's users would.
func (e *Env) InstallPolicies(ctx context.Context) error {
	if err := devenv.ApplyDir(ctx, e.Client, PolicyDir()); err != nil {
		return err
	}
	return waitPoliciesLoaded(ctx, e.Client)
}

// sentinelName names the policy and binding waitPoliciesLoaded makes, and
// the ConfigMap the policy refuses.
const sentinelName = "stackyard-test-sentinel"

// waitPoliciesLoaded returns once every admission policy and binding
// created before it is in force. The API server loads policies from its
// watch caches of policies and bindings, a moment after they are written,
// and a watch delivers objects in the order they were written. So a
// sentinel policy and binding, made last, that refuses a dry-run request
// proves that every policy and binding written before it is loaded too.
// A test that attacked before then could succeed for the wrong reason.
func waitPoliciesLoaded(ctx context.Context, c client.Client) error {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: sentinelName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != '%s'", sentinelName),
				Message:    sentinelName + " is loaded",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sentinelName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        sentinelName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the policy sentinel: %w", err)
		}
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: sentinelName}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last != nil && strings.Contains(last.Error(), sentinelName+" is loaded"), nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not load the admission policies within a minute (last probe: %v): %w", last, err)
	}
	return errors.Join(
		client.IgnoreNotFound(c.Delete(ctx, binding)),
		client.IgnoreNotFound(c.Delete(ctx, policy)))
}
