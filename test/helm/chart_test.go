package helm_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/stackyard/stackyard/test/testenv"
)

// TestRenderDefaults renders the default values: the operator and what it
// needs, the generated CRDs, rules and policies unchanged, and flags whose
// values are the operator's own defaults, so a user who sets nothing gets
// the operator as its authors configured it.
func TestRenderDefaults(t *testing.T) {
	t.Parallel()
	m := render(t)
	crds, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	want := map[string]int{
		"CustomResourceDefinition": len(crds), "ValidatingAdmissionPolicy": 10, "ValidatingAdmissionPolicyBinding": 10, "MutatingWebhookConfiguration": 1, "ValidatingWebhookConfiguration": 1,
		"ServiceAccount": 1, "ClusterRole": 7, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"Deployment": 1, "Service": 3,
	}
	if got := m.kinds(); !maps.Equal(got, want) {
		t.Errorf("rendered kinds %v, want %v", got, want)
	}
	for _, u := range m {
		if ns := u.GetNamespace(); ns != "" && ns != namespace {
			t.Errorf("%s %s is in namespace %q", u.GetKind(), u.GetName(), ns)
		}
	}
	checkGenerated(t, m, true, true)
	for _, u := range m.ofKind("CustomResourceDefinition") {
		if u.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall", u.GetName())
		}
	}

	o := checkOperator(t, m, namespace)
	if r := o.deployment.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("replicas %v, want 1", r)
	}
	if o.container.Image != "ghcr.io/stackyard/stackyard:latest" {
		t.Errorf("image %s", o.container.Image)
	}
	for _, name := range []string{"metrics", "artifacts"} {
		if m.get("Service", "stackyard-"+name) == nil {
			t.Errorf("no Service stackyard-%s", name)
		}
	}

	defaults := operatorCommand(t).Flags()
	for _, name := range []string{
		"runtime", "state-dir", "artifact-listen", "agent-image", "metrics-bind-address",
		"health-probe-bind-address", "stack-concurrency", "idle-after", "stall-after",
	} {
		def := defaults.Lookup(name).DefValue
		got := o.flags[name]
		if d, err := time.ParseDuration(def); err == nil {
			if g, err := time.ParseDuration(got); err == nil && g == d {
				continue
			}
		}
		if got != def {
			t.Errorf("the chart passes --%s=%s by default, the operator's default is %s: keep values.yaml in step", name, got, def)
		}
	}
	for _, name := range []string{"cloud-api-bind-address", "dashboard-bind-address", "dashboard-read-only", "receiver-bind-address"} {
		if v, ok := o.flags[name]; ok {
			t.Errorf("--%s=%s by default; the cloud API, the dashboard and the receivers are opt-in", name, v)
		}
	}
	// Every namespace is watched, and the ClusterRole bound cluster-wide.
	if v, ok := o.flags["watch-namespaces"]; !ok || v != "" {
		t.Errorf("--watch-namespaces=%q (given: %v) by default, want it empty: every namespace", v, ok)
	}
	if m.get("ClusterRoleBinding", "stackyard-manager") == nil || len(m.ofKind("RoleBinding")) != 1 {
		t.Errorf("by default the ClusterRole is bound cluster-wide, and only the leader election Role in the namespace: %v", m.kinds())
	}
	if v, ok := o.flags["max-agents"]; ok {
		t.Errorf("--max-agents=%s with the kubernetes runtime, which has no such bound", v)
	}
}

// leftToOperator are the flags of `stackyard operator` that the chart does
// not set even with every option on, and why. extraArgs can still pass them.
var leftToOperator = map[string]string{
	"tool-dirs":            "the local runtime's PATH additions; in a pod, the image's PATH is the place",
	"max-agents":           "the local runtime's limit (maxAgents), passed with runtime=local only; TestRenderOptions checks it",
	"warm-agents":          "the local runtime's pre-started agents; its default suits a pod, extraArgs otherwise",
	"zap-devel":            "development logging; logLevel and logEncoder cover production",
	"zap-stacktrace-level": "rarely changed; extraArgs",
	"zap-time-encoding":    "rarely changed; extraArgs (testdata/everything.yaml passes it so)",
	"shard":                "passed to the named shards' Deployments only (values shards); TestRenderShards checks it",
	"shards":               "passed when values shards names some; TestRenderShards checks it",
	"pprof-bind-address":   "diagnosis only, off by default; extraArgs",
}

// TestRenderEverything renders every option on: two replicas, the cloud
// API under the name and port docs/change-management.md tells Kargo users
// to query, the read-only dashboard behind an Ingress, a pinned image.
func TestRenderEverything(t *testing.T) {
	t.Parallel()
	m := render(t, "--values", everything())
	checkGenerated(t, m, true, true)
	o := checkOperator(t, m, namespace)
	if r := o.deployment.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("replicas %v, want 2", r)
	}
	if want := "registry.example.com/platform/stackyard:v0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"; o.container.Image != want {
		t.Errorf("image %s, want %s", o.container.Image, want)
	}
	for flag, want := range map[string]string{
		"agent-image":           "registry.example.com/platform/stackyard-agent:v0.1.0",
		"dashboard-read-only":   "true",
		"receiver-bind-address": ":9292",
		"stack-concurrency":     "8",
		// The cache on a class of its own; no ephemeral-storage limit.
		"workspace-cache-size":                "5Gi",
		"workspace-cache-storage-class":       "fast-ssd",
		"workspace-ephemeral-storage-request": "2Gi",
		"workspace-ephemeral-storage-limit":   "",
		"zap-log-level":                       "debug",
		"zap-time-encoding":                   "rfc3339",
		// The first host of the Ingress, which its tls covers.
		"dashboard-external-url": "https://stackyard.example.com",
	} {
		if o.flags[flag] != want {
			t.Errorf("--%s=%q, want %q", flag, o.flags[flag], want)
		}
	}
	// Every flag of `stackyard operator` is one the chart sets, or one it
	// leaves to the operator for a stated reason: a new flag fails here
	// until the chart has a value for it or a reason not to.
	operatorCommand(t).Flags().VisitAll(func(f *pflag.Flag) {
		if _, set := o.flags[f.Name]; !set && leftToOperator[f.Name] == "" {
			t.Errorf("the chart never passes --%s (%s): give it a value in values.yaml, or a reason in leftToOperator", f.Name, f.Usage)
		}
	})
	if !slices.ContainsFunc(o.container.Env, func(e corev1.EnvVar) bool { return e.Name == "HTTPS_PROXY" }) {
		t.Errorf("extraEnv missing from %v", o.container.Env)
	}

	// The cloud API is where the Kargo section of the docs says it is.
	docs, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "change-management.md"))
	if err != nil {
		t.Fatal(err)
	}
	cloud := servicePort(t, m, "stackyard-cloud-api", "cloud-api")
	if base := fmt.Sprintf("http://stackyard-cloud-api.%s.svc:%d", namespace, cloud); !strings.Contains(string(docs), base) {
		t.Errorf("the cloud API is at %s, which docs/change-management.md does not name", base)
	}
	if p := servicePort(t, m, "stackyard-dashboard", "dashboard"); p != 8090 {
		t.Errorf("the dashboard Service's port is %d, want 8090", p)
	}

	dashboardIngress := m.get("Ingress", "stackyard-dashboard")
	if dashboardIngress == nil || len(m.ofKind("Ingress")) != 2 {
		t.Fatalf("%d Ingresses, want the dashboard's and the receivers'", len(m.ofKind("Ingress")))
	}
	var ing networkingv1.Ingress
	fromUnstructured(t, dashboardIngress, &ing)
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "stackyard.example.com" || len(ing.Spec.TLS) != 1 ||
		ing.Annotations["nginx.ingress.kubernetes.io/auth-response-headers"] != "Authorization" || ptr.Deref(ing.Spec.IngressClassName, "") != "nginx" {
		t.Errorf("the Ingress does not carry the host, TLS, class and annotations of the values: %+v", ing)
	}
	for _, rule := range ing.Spec.Rules {
		for _, path := range rule.HTTP.Paths {
			if b := path.Backend.Service; b == nil || b.Name != "stackyard-dashboard" || b.Port.Name != "dashboard" {
				t.Errorf("the Ingress path %s goes to %+v, not the dashboard Service", path.Path, path.Backend)
			}
		}
	}
}

// TestRenderOptions flips one switch at a time.
func TestRenderOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, m manifest, o operator)
	}{{
		name: "crds not installed",
		args: []string{"--set", "crds.install=false"},
		check: func(t *testing.T, m manifest, _ operator) {
			checkGenerated(t, m, false, true)
		},
	}, {
		name: "crds not kept",
		args: []string{"--set", "crds.keep=false"},
		check: func(t *testing.T, m manifest, _ operator) {
			checkGenerated(t, m, true, true)
			for _, u := range m.ofKind("CustomResourceDefinition") {
				if _, ok := u.GetAnnotations()["helm.sh/resource-policy"]; ok {
					t.Errorf("CRD %s has a resource policy", u.GetName())
				}
			}
		},
	}, {
		name: "admission policies off",
		args: []string{"--set", "admissionPolicies.enabled=false"},
		check: func(t *testing.T, m manifest, _ operator) {
			checkGenerated(t, m, true, false)
		},
	}, {
		name: "workspace service accounts",
		args: []string{"--set", "workspaces.namespaces={apps,infra}"},
		check: func(t *testing.T, m manifest, _ operator) {
			var sas []string
			for _, u := range m.ofKind("ServiceAccount") {
				if u.GetName() == "pulumi" {
					sas = append(sas, u.GetNamespace())
				}
			}
			if !slices.Equal(sas, []string{"apps", "infra"}) {
				t.Errorf("workspace ServiceAccounts in %v, want apps and infra", sas)
			}
			bound := 0
			for _, u := range m.ofKind("ClusterRoleBinding") {
				role, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
				subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
				if role == "system:auth-delegator" && len(subjects) == 1 {
					subject, _ := subjects[0].(map[string]any)
					if subject["name"] == "pulumi" && (subject["namespace"] == "apps" || subject["namespace"] == "infra") {
						bound++
					}
				}
			}
			if bound != 2 {
				t.Errorf("%d auth-delegator bindings for the workspace ServiceAccounts, want 2", bound)
			}
		},
	}, {
		name:  "watch namespaces",
		args:  []string{"--set", "watchNamespaces={apps,infra}"},
		check: checkWatchNamespaces,
	}, {
		name: "watch namespaces without rbac",
		args: []string{"--set", "watchNamespaces={apps}", "--set", "rbac.create=false"},
		check: func(t *testing.T, m manifest, o operator) {
			if o.flags["watch-namespaces"] != "apps" {
				t.Errorf("--watch-namespaces=%q, want apps", o.flags["watch-namespaces"])
			}
			if n := len(m.ofKind("RoleBinding")) + len(m.ofKind("ClusterRoleBinding")); n != 0 {
				t.Errorf("%d bindings rendered with rbac.create=false", n)
			}
		},
	}, {
		name: "max agents",
		args: []string{"--set", "runtime=local", "--set", "maxAgents=0"},
		check: func(t *testing.T, m manifest, o operator) {
			if got, ok := o.flags["max-agents"]; !ok || got != "0" {
				t.Errorf("--max-agents=%q (given: %v), want 0 (unbounded) from maxAgents=0", got, ok)
			}
		},
	}, {
		name: "max agents left to the operator",
		args: []string{"--set", "runtime=local"},
		check: func(t *testing.T, m manifest, o operator) {
			if got, ok := o.flags["max-agents"]; ok {
				t.Errorf("--max-agents=%s without maxAgents; the operator's own default follows the cores and memory", got)
			}
		},
	}, {
		name: "max agents with the kubernetes runtime",
		args: []string{"--set", "maxAgents=3"},
		check: func(t *testing.T, m manifest, o operator) {
			if got, ok := o.flags["max-agents"]; ok {
				t.Errorf("--max-agents=%s with the kubernetes runtime, which has no such bound", got)
			}
		},
	}, {
		name: "no rbac",
		args: []string{"--set", "rbac.create=false", "--set", "peopleRoles.create=false"},
		check: func(t *testing.T, m manifest, _ operator) {
			for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				if n := len(m.ofKind(kind)); n != 0 {
					t.Errorf("%d objects of kind %s", n, kind)
				}
			}
		},
	}, {
		// The people's roles, and an approver of one stage: a Role that
		// names the stage alone, bound to the subjects given.
		name: "approvers",
		args: []string{"--set", "rbac.create=false",
			"--set", "peopleRoles.approvers[0].namespace=payments", "--set", "peopleRoles.approvers[0].stage=prod",
			"--set", "peopleRoles.approvers[0].subjects[0].kind=Group", "--set", "peopleRoles.approvers[0].subjects[0].name=payments-approvers"},
		check: func(t *testing.T, m manifest, _ operator) {
			var names []string
			for _, u := range m.ofKind("ClusterRole") {
				names = append(names, u.GetName())
			}
			slices.Sort(names)
			want := []string{"stackyard-admin", "stackyard-approver", "stackyard-editor", "stackyard-governor", "stackyard-promoter", "stackyard-viewer"}
			if !slices.Equal(names, want) {
				t.Errorf("ClusterRoles %v, want %v", names, want)
			}
			role, binding := m.get("Role", "stackyard-approver-prod"), m.get("RoleBinding", "stackyard-approver-prod")
			if role == nil || binding == nil || role.GetNamespace() != "payments" || binding.GetNamespace() != "payments" {
				t.Fatalf("no Role and RoleBinding stackyard-approver-prod in payments: %v", m.kinds())
			}
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			approve := rules[0].(map[string]any)
			if fmt.Sprint(approve["verbs"]) != "[approve operate]" || fmt.Sprint(approve["resourceNames"]) != "[prod]" {
				t.Errorf("the approver's first rule is %v, want approve and operate on stage prod alone", approve)
			}
			subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
			if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "payments-approvers" {
				t.Errorf("the approvers bound are %v", subjects)
			}
		},
	}, {
		name: "existing service account",
		args: []string{"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=platform-operator"},
		check: func(t *testing.T, m manifest, o operator) {
			if n := len(m.ofKind("ServiceAccount")); n != 0 {
				t.Errorf("%d ServiceAccounts rendered", n)
			}
			if sa := o.deployment.Spec.Template.Spec.ServiceAccountName; sa != "platform-operator" {
				t.Errorf("the pod runs as %s", sa)
			}
		},
	}, {
		name: "local runtime",
		args: []string{"--set", "runtime=local"},
		check: func(t *testing.T, m manifest, o operator) {
			if m.get("Service", "stackyard-artifacts") != nil {
				t.Error("the artifact Service is rendered for the local runtime, whose agents use the loopback")
			}
		},
	}, {
		name: "metrics off",
		args: []string{"--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true"},
		check: func(t *testing.T, m manifest, o operator) {
			if m.get("Service", "stackyard-metrics") != nil || len(m.ofKind("ServiceMonitor")) != 0 {
				t.Error("a metrics Service or ServiceMonitor is rendered with metrics off")
			}
		},
	}, {
		name:  "service monitor",
		args:  []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.interval=30s", "--set", "metrics.serviceMonitor.labels.release=prometheus"},
		check: checkServiceMonitor,
	}, {
		name: "receivers",
		args: []string{"--values", everything()},
		check: func(t *testing.T, m manifest, o operator) {
			servicePort(t, m, "stackyard-receivers", "receivers")
			ing := m.get("Ingress", "stackyard-receivers")
			if ing == nil {
				t.Fatal("no Ingress for the receivers")
			}
			if text := fmt.Sprint(ing.Object["spec"]); !strings.Contains(text, "path:/hook/") || strings.Contains(text, "path:/ ") {
				t.Errorf("the receivers' Ingress routes more than /hook/: %s", text)
			}
		},
	}, {
		name: "dashboard without ingress",
		args: []string{"--set", "dashboard.enabled=true"},
		check: func(t *testing.T, m manifest, o operator) {
			if len(m.ofKind("Ingress")) != 0 {
				t.Error("an Ingress is rendered though dashboard.ingress.enabled is false")
			}
			for _, flag := range []string{"dashboard-read-only", "dashboard-external-url"} {
				if v, ok := o.flags[flag]; ok {
					t.Errorf("--%s=%s without a value asking for it", flag, v)
				}
			}
			servicePort(t, m, "stackyard-dashboard", "dashboard")
		},
	}, {
		name: "dashboard external URL",
		args: []string{"--values", everything(), "--set", "dashboard.externalURL=https://yard.example.org/"},
		check: func(t *testing.T, m manifest, o operator) {
			if got := o.flags["dashboard-external-url"]; got != "https://yard.example.org/" {
				t.Errorf("--dashboard-external-url=%s, want dashboard.externalURL", got)
			}
		},
	}, {
		name: "dashboard ingress without tls",
		args: []string{"--values", everything(), "--set", "dashboard.ingress.tls=null"},
		check: func(t *testing.T, m manifest, o operator) {
			if got := o.flags["dashboard-external-url"]; got != "http://stackyard.example.com" {
				t.Errorf("--dashboard-external-url=%s, want the Ingress host over http", got)
			}
		},
	}, {
		name: "fullname override",
		args: []string{"--set", "fullnameOverride=yard", "--set", "cloudAPI.enabled=true"},
		check: func(t *testing.T, m manifest, o operator) {
			for _, name := range []string{"yard-artifacts", "yard-metrics", "yard-cloud-api"} {
				if m.get("Service", name) == nil {
					t.Errorf("no Service %s", name)
				}
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := render(t, tc.args...)
			tc.check(t, m, checkOperator(t, m, namespace))
		})
	}
}

// TestRenderAnotherRelease installs under another release name and
// namespace: every name follows the release, and every reference (the
// artifact URL, bindings, Services) follows the names.
func TestRenderAnotherRelease(t *testing.T) {
	t.Parallel()
	out, err := runHelm(t, nil, "template", "edge", chartDir(), "--namespace", "ops", "--values", everything())
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, []byte(out))
	o := checkOperator(t, m, "ops")
	if o.deployment.Name != "edge-stackyard" || o.flags["artifact-url"] != "http://edge-stackyard-artifacts.ops.svc:9090" {
		t.Errorf("Deployment %s with --artifact-url=%s", o.deployment.Name, o.flags["artifact-url"])
	}
	if m.get("Service", "edge-stackyard-cloud-api") == nil || m.get("ClusterRole", "edge-stackyard-manager") == nil {
		t.Errorf("the Services and the ClusterRole are not named after the release: %v", m.kinds())
	}
}
