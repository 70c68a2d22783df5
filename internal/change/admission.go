package change

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/config/policy"
)

// Gated reports whether a stage has a gate the admission policies hold
// up: an approval, policy rules, a freeze, promotion windows,
// verification, or upstream stages a release must pass first. Only an
// ungated stage (releases straight from the pipeline, no gate) is
// promoted into while the policies are missing.
func Gated(st *promotionv1alpha1.Stage) bool {
	spec := &st.Spec
	return spec.Approval != nil || len(spec.Policies) > 0 || spec.Freeze != nil || len(spec.PromotionWindows) > 0 ||
		spec.Verification != nil || len(spec.Sources.Stages) > 0
}

// ExpectedPolicies parses the admission policies and bindings the
// operator was built with (config/policy).
func ExpectedPolicies() ([]admissionv1.ValidatingAdmissionPolicy, []admissionv1.ValidatingAdmissionPolicyBinding, error) {
	var policies []admissionv1.ValidatingAdmissionPolicy
	var bindings []admissionv1.ValidatingAdmissionPolicyBinding
	err := fs.WalkDir(policy.Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == "kustomization.yaml" {
			return err
		}
		data, err := policy.Files.ReadFile(path)
		if err != nil {
			return err
		}
		p, b, err := DecodePolicies(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		policies, bindings = append(policies, p...), append(bindings, b...)
		return nil
	})
	return policies, bindings, err
}

// DecodePolicies reads the ValidatingAdmissionPolicies and their
// bindings from a stream of YAML documents separated by "---" lines,
// strictly, leaving out documents of other kinds.
func DecodePolicies(data []byte) ([]admissionv1.ValidatingAdmissionPolicy, []admissionv1.ValidatingAdmissionPolicyBinding, error) {
	var policies []admissionv1.ValidatingAdmissionPolicy
	var bindings []admissionv1.ValidatingAdmissionPolicyBinding
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionv1.ValidatingAdmissionPolicy
			if err := yaml.UnmarshalStrict(doc, &p); err != nil {
				return nil, nil, err
			}
			policies = append(policies, p)
		case "ValidatingAdmissionPolicyBinding":
			var b admissionv1.ValidatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				return nil, nil, err
			}
			bindings = append(bindings, b)
		}
	}
	return policies, bindings, nil
}

// AdmissionGuard answers whether the API server enforces the admission
// policies the gates rest on: each policy of config/policy exists with
// the same rules, variables, match rules and failure policy, and each of
// its bindings exists, denies, and is not narrowed. Without them anyone
// could forge an approval or rewrite a record, so the operator does not
// promote into a gated stage (Gated) while Check fails: it fails closed.
type AdmissionGuard struct {
	// Reader reads the policies live (cluster-scoped, by name).
	Reader client.Reader
	// TTL is how long an answer is reused; 10 seconds when zero.
	TTL time.Duration

	mu       sync.Mutex
	checked  time.Time
	last     error
	policies []admissionv1.ValidatingAdmissionPolicy
	bindings []admissionv1.ValidatingAdmissionPolicyBinding
}

// ReasonAdmissionPolicies is the reason of the wait of a gated stage, and
// of a promotion into one, while the policies are not in force.
const ReasonAdmissionPolicies = "AdmissionPoliciesNotInForce"

// HoldRecheck is how often something the guard holds looks again.
const HoldRecheck = 15 * time.Second

// Holds reports whether the guard holds promotions into st: st is gated
// and the policies are not in force (err then says why). A failure to
// read them is returned with held false, to be retried. A nil guard holds
// nothing.
func (g *AdmissionGuard) Holds(ctx context.Context, st *promotionv1alpha1.Stage) (held bool, err error) {
	if g == nil || !Gated(st) {
		return false, nil
	}
	err = g.Check(ctx)
	return errors.Is(err, ErrAdmissionPolicies), err
}

// ErrAdmissionPolicies is the error Check wraps when a policy or binding
// is missing or altered.
var ErrAdmissionPolicies = errors.New("the admission policies that hold the gates are not in force")

// Check returns nil when every policy and binding is in force, an error
// wrapping ErrAdmissionPolicies that names the first one that is not, or
// the error of reading them.
func (g *AdmissionGuard) Check(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	ttl := g.TTL
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	if !g.checked.IsZero() && time.Since(g.checked) < ttl {
		return g.last
	}
	if g.policies == nil {
		var err error
		if g.policies, g.bindings, err = ExpectedPolicies(); err != nil {
			return fmt.Errorf("reading the policies the operator was built with: %w", err)
		}
	}
	err := g.check(ctx)
	var apiErr apierrors.APIStatus
	if err != nil && !errors.Is(err, ErrAdmissionPolicies) && !errors.As(err, &apiErr) {
		return err // a failed call: not remembered
	}
	g.checked, g.last = time.Now(), err
	return err
}

func (g *AdmissionGuard) check(ctx context.Context) error {
	for i := range g.policies {
		want := &g.policies[i]
		var live admissionv1.ValidatingAdmissionPolicy
		if err := g.Reader.Get(ctx, client.ObjectKey{Name: want.Name}, &live); err != nil {
			return notInForce(err, "ValidatingAdmissionPolicy", want.Name)
		}
		if what := policyDiffers(want, &live); what != "" {
			return fmt.Errorf("%w: ValidatingAdmissionPolicy %s was altered (%s); install config/policy again", ErrAdmissionPolicies, want.Name, what)
		}
	}
	for i := range g.bindings {
		want := &g.bindings[i]
		var live admissionv1.ValidatingAdmissionPolicyBinding
		if err := g.Reader.Get(ctx, client.ObjectKey{Name: want.Name}, &live); err != nil {
			return notInForce(err, "ValidatingAdmissionPolicyBinding", want.Name)
		}
		if what := bindingDiffers(want, &live); what != "" {
			return fmt.Errorf("%w: ValidatingAdmissionPolicyBinding %s was altered (%s); install config/policy again", ErrAdmissionPolicies, want.Name, what)
		}
	}
	return nil
}

func notInForce(err error, kind, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s %s is missing; install config/policy (the Helm chart and kustomize do by default)", ErrAdmissionPolicies, kind, name)
	}
	return fmt.Errorf("reading %s %s: %w", kind, name, err)
}

// policyDiffers names what of live differs from want, or "". Fields the
// API server defaults are compared only where want sets them.
func policyDiffers(want, live *admissionv1.ValidatingAdmissionPolicy) string {
	switch {
	case live.Spec.FailurePolicy == nil || *live.Spec.FailurePolicy != admissionv1.Fail:
		return "failurePolicy is not Fail"
	case !equality.Semantic.DeepEqual(want.Spec.Validations, live.Spec.Validations):
		return "validations"
	case !equality.Semantic.DeepEqual(want.Spec.Variables, live.Spec.Variables):
		return "variables"
	case len(live.Spec.MatchConditions) > 0:
		return "matchConditions narrow it"
	case live.Spec.ParamKind != nil:
		return "paramKind"
	case live.Spec.MatchConstraints == nil || !sameRules(want.Spec.MatchConstraints.ResourceRules, live.Spec.MatchConstraints.ResourceRules):
		return "matchConstraints.resourceRules"
	case live.Spec.MatchConstraints.NamespaceSelector != nil && !emptySelector(live.Spec.MatchConstraints.NamespaceSelector.MatchLabels, len(live.Spec.MatchConstraints.NamespaceSelector.MatchExpressions)):
		return "matchConstraints.namespaceSelector narrows it"
	case live.Spec.MatchConstraints.ObjectSelector != nil && !emptySelector(live.Spec.MatchConstraints.ObjectSelector.MatchLabels, len(live.Spec.MatchConstraints.ObjectSelector.MatchExpressions)):
		return "matchConstraints.objectSelector narrows it"
	case len(live.Spec.MatchConstraints.ExcludeResourceRules) > 0:
		return "matchConstraints.excludeResourceRules narrow it"
	}
	return ""
}

// bindingDiffers names what of live differs from want, or "".
func bindingDiffers(want, live *admissionv1.ValidatingAdmissionPolicyBinding) string {
	switch {
	case live.Spec.PolicyName != want.Spec.PolicyName:
		return "policyName"
	case !slices.Contains(live.Spec.ValidationActions, admissionv1.Deny):
		return "validationActions do not Deny"
	case live.Spec.MatchResources != nil:
		return "matchResources narrow it"
	case live.Spec.ParamRef != nil:
		return "paramRef"
	}
	return ""
}

func emptySelector(labels map[string]string, expressions int) bool {
	return len(labels) == 0 && expressions == 0
}

// sameRules compares resource rules, as the API server stores them
// (scope defaulted to "*").
func sameRules(want, live []admissionv1.NamedRuleWithOperations) bool {
	key := func(rules []admissionv1.NamedRuleWithOperations) []string {
		var keys []string
		for _, r := range rules {
			scope := admissionv1.AllScopes
			if r.Scope != nil {
				scope = *r.Scope
			}
			keys = append(keys, fmt.Sprintf("%v|%v|%v|%v|%v|%s", r.ResourceNames, r.Operations, r.APIGroups, r.APIVersions, r.Resources, scope))
		}
		slices.Sort(keys)
		return keys
	}
	return strings.Join(key(want), "\n") == strings.Join(key(live), "\n")
}
