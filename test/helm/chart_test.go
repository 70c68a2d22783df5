package helm_test

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/stackyard/stackyard/internal/cli"
	"github.com/stackyard/stackyard/internal/leader"
	"github.com/stackyard/stackyard/test/testenv"
)

// listenerFlags maps each named container port of the operator to the
// flag that makes it listen there.
var listenerFlags = map[string]string{
	"metrics":   "metrics-bind-address",
	"probes":    "health-probe-bind-address",
	"artifacts": "artifact-listen",
	"cloud-api": "cloud-api-bind-address",
	"dashboard": "dashboard-bind-address",
	"receivers": "receiver-bind-address",
}

// operator is the rendered Deployment, decoded, with the flags its
// container passes to `stackyard operator`.
type operator struct {
	deployment appsv1.Deployment
	container  corev1.Container
	// flags maps a flag's name to its value ("true" for a bare boolean
	// flag); a flag given twice keeps its last value, as pflag does.
	flags map[string]string
}

// operatorCommand returns a new `stackyard operator` command, flags unset.
func operatorCommand(t *testing.T) *cobra.Command {
	t.Helper()
	cmd, _, err := cli.NewRootCommand().Find([]string{"operator"})
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// fromUnstructured converts u into a typed object.
func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// decodeOperator finds the one Deployment in m and checks that its
// arguments are a command line `stackyard operator` accepts: known flags
// with values they parse.
func decodeOperator(t *testing.T, m manifest) operator {
	t.Helper()
	deployments := m.ofKind("Deployment")
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(deployments))
	}
	return decodeDeployment(t, deployments[0])
}

// decodeDeployment decodes an operator Deployment and checks its arguments
// as decodeOperator does.
func decodeDeployment(t *testing.T, u *unstructured.Unstructured) operator {
	t.Helper()
	var o operator
	fromUnstructured(t, u, &o.deployment)
	containers := o.deployment.Spec.Template.Spec.Containers
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	o.container = containers[0]
	args := o.container.Args
	if len(args) == 0 || args[0] != "operator" {
		t.Fatalf("args %v do not run `stackyard operator`", args)
	}
	cmd := operatorCommand(t)
	if err := cmd.Flags().Parse(args[1:]); err != nil {
		t.Errorf("`stackyard operator` refuses the Deployment's arguments %q: %v", args[1:], err)
	} else if rest := cmd.Flags().Args(); len(rest) > 0 {
		t.Errorf("the Deployment passes %q, which are not flags", rest)
	}
	o.flags = map[string]string{}
	for _, arg := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !ok {
			value = "true"
		}
		o.flags[name] = value
	}
	return o
}

// containerPorts maps the operator container's port names to numbers.
func (o operator) containerPorts() map[string]int32 {
	ports := map[string]int32{}
	for _, p := range o.container.Ports {
		ports[p.Name] = p.ContainerPort
	}
	return ports
}

// checkOperator asserts what must hold of the rendered operator whatever
// the values: leader election in its own namespace, the identity its
// RBAC is bound to, probes on the probe listener, a container port for
// exactly the listeners that are on (at the port the flag binds), Services
// that reach those ports, the artifact URL naming the artifact Service,
// and a pod that passes the restricted Pod Security Standard.
func checkOperator(t *testing.T, m manifest, ns string) operator {
	t.Helper()
	o := decodeOperator(t, m)
	spec := o.deployment.Spec.Template.Spec
	if o.flags["leader-elect"] != "true" || o.flags["leader-election-namespace"] != ns {
		t.Errorf("leader election: --leader-elect=%q --leader-election-namespace=%q, want true and %q",
			o.flags["leader-elect"], o.flags["leader-election-namespace"], ns)
	}
	if got := o.deployment.Namespace; got != ns {
		t.Errorf("the Deployment is in namespace %q, want %q", got, ns)
	}

	// Identity: the ServiceAccount the pod runs as is the one the operator
	// mints tokens for and the one the roles are bound to.
	sa := spec.ServiceAccountName
	if want := ns + "/" + sa; o.flags["service-account"] != want {
		t.Errorf("--service-account=%q, but the pod runs as %s", o.flags["service-account"], want)
	}
	// (The workspace pods' ServiceAccounts and their bindings, labelled
	// component workspace, are not the operator's.)
	for _, u := range m.ofKind("ServiceAccount") {
		if isWorkspaceObject(u) {
			continue
		}
		if u.GetName() != sa || u.GetNamespace() != ns {
			t.Errorf("ServiceAccount %s/%s rendered, the pod runs as %s/%s", u.GetNamespace(), u.GetName(), ns, sa)
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range m.ofKind(kind) {
			if isWorkspaceObject(u) {
				continue
			}
			var b rbacv1.ClusterRoleBinding // a RoleBinding has the same fields
			fromUnstructured(t, u, &b)
			if !slices.Contains(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: sa, Namespace: ns}) {
				t.Errorf("%s %s binds %v, not the operator's ServiceAccount %s/%s", kind, b.Name, b.Subjects, ns, sa)
			}
			if m.get(b.RoleRef.Kind, b.RoleRef.Name) == nil {
				t.Errorf("%s %s refers to %s %s, which is not rendered", kind, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
		}
	}

	// Listeners: a container port for each listener that is on, at the
	// port its flag binds, and for nothing else.
	ports := o.containerPorts()
	for name, flag := range listenerFlags {
		addr := o.flags[flag]
		on := addr != "" && addr != "0"
		port, open := ports[name]
		switch {
		case on && !open:
			t.Errorf("--%s=%s listens, but the container has no port named %s", flag, addr, name)
		case !on && open:
			t.Errorf("the container opens port %s (%d), but --%s is off", name, port, flag)
		case on && addr != fmt.Sprintf(":%d", port):
			t.Errorf("--%s=%s, but the container's port %s is %d", flag, addr, name, port)
		}
	}
	for name := range ports {
		if listenerFlags[name] == "" {
			t.Errorf("the container opens port %s, which no flag of the operator listens on", name)
		}
	}
	for probeName, probe := range map[string]*corev1.Probe{"/healthz": o.container.LivenessProbe, "/readyz": o.container.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != probeName || probe.HTTPGet.Port.StrVal != "probes" {
			t.Errorf("the probe of %s is %+v, want an HTTP GET on the port named probes", probeName, probe)
		}
	}

	// The operator knows its own Pod from the downward API, so that the
	// leader labels it (internal/leader).
	if got := o.flags["pod"]; got != "$(POD_NAMESPACE)/$(POD_NAME)" {
		t.Errorf("--pod=%q, want $(POD_NAMESPACE)/$(POD_NAME): the leader could not label its Pod", got)
	}
	for name, field := range map[string]string{"POD_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"} {
		if !slices.ContainsFunc(o.container.Env, func(e corev1.EnvVar) bool {
			return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field
		}) {
			t.Errorf("the container's environment has no %s from the downward API's %s", name, field)
		}
	}

	// Services select the operator's pods and reach a port it opens. The
	// artifacts Service selects the leader's only, by the label the leader
	// puts on its Pod: a standby has built no artifacts. The others reach
	// every replica, each of which serves them.
	podLabels := o.deployment.Spec.Template.Labels
	for _, u := range m.ofKind("Service") {
		var svc corev1.Service
		fromUnstructured(t, u, &svc)
		if len(svc.Spec.Selector) == 0 {
			t.Errorf("Service %s selects nothing", svc.Name)
		}
		artifacts := slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.TargetPort.StrVal == "artifacts" })
		for k, v := range svc.Spec.Selector {
			if k == leader.Label && v == "true" && artifacts {
				continue
			}
			if podLabels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the operator's pods do not carry", svc.Name, k, v)
			}
		}
		if artifacts && svc.Spec.Selector[leader.Label] != "true" {
			t.Errorf("Service %s reaches every replica's artifact server, but only the leader builds artifacts: select %s=true", svc.Name, leader.Label)
		}
		for _, p := range svc.Spec.Ports {
			if _, ok := ports[p.TargetPort.StrVal]; !ok {
				t.Errorf("Service %s targets port %q, which the operator does not open", svc.Name, p.TargetPort.String())
			}
		}
	}

	// The artifact URL, which the kubernetes runtime needs, is the
	// artifact Service's address.
	if o.flags["runtime"] == "kubernetes" {
		checkArtifactURL(t, m, o, ns)
	} else if url, ok := o.flags["artifact-url"]; ok {
		t.Errorf("--artifact-url=%s with --runtime=%s", url, o.flags["runtime"])
	}

	// The restricted Pod Security Standard, and writable directories where
	// the operator writes.
	psc, csc := spec.SecurityContext, o.container.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the pod's security context %+v is not non-root 65532 with the RuntimeDefault seccomp profile", psc)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("the container's security context %+v is not read-only, without privilege escalation and capabilities", csc)
	}
	mounted := map[string]bool{}
	for _, vm := range o.container.VolumeMounts {
		mounted[vm.MountPath] = !vm.ReadOnly
	}
	for _, dir := range []string{o.flags["state-dir"], "/tmp"} {
		if !mounted[dir] {
			t.Errorf("%s is not a writable volume; the root filesystem is read-only", dir)
		}
	}
	return o
}

// checkArtifactURL asserts that --artifact-url is http://SERVICE.NS.svc:PORT
// of a rendered Service whose port PORT reaches the artifact listener.
func checkArtifactURL(t *testing.T, m manifest, o operator, ns string) {
	t.Helper()
	raw := o.flags["artifact-url"]
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		t.Errorf("--artifact-url=%q is not an http URL", raw)
		return
	}
	name, ok := strings.CutSuffix(u.Hostname(), "."+ns+".svc")
	if !ok {
		t.Errorf("--artifact-url=%s does not name a Service of namespace %s", raw, ns)
		return
	}
	obj := m.get("Service", name)
	if obj == nil {
		t.Errorf("--artifact-url=%s names Service %s, which is not rendered", raw, name)
		return
	}
	var svc corev1.Service
	fromUnstructured(t, obj, &svc)
	for _, p := range svc.Spec.Ports {
		if fmt.Sprint(p.Port) == u.Port() && p.TargetPort.StrVal == "artifacts" {
			return
		}
	}
	t.Errorf("--artifact-url=%s, but Service %s has no port %s to the artifact server: %+v", raw, name, u.Port(), svc.Spec.Ports)
}

// TestRenderDefaults renders the default values: the operator and what it
// needs, the generated CRDs, rules and policies unchanged, and flags whose
// values are the operator's own defaults, so a user who sets nothing gets
// the operator as its authors configured it.
func TestRenderDefaults(t *testing.T) {
	t.Parallel()
	m := render(t)
	crds, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	want := map[string]int{
		"CustomResourceDefinition": len(crds), "ValidatingAdmissionPolicy": 8, "ValidatingAdmissionPolicyBinding": 8,
		"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"Deployment": 1, "Service": 2,
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

// servicePort returns the port of Service name whose target is the
// container port named target, failing the test when there is none.
func servicePort(t *testing.T, m manifest, name, target string) int32 {
	t.Helper()
	u := m.get("Service", name)
	if u == nil {
		t.Fatalf("no Service %s", name)
	}
	var svc corev1.Service
	fromUnstructured(t, u, &svc)
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.StrVal == target {
			if p.Name != target {
				t.Errorf("Service %s names its port %q, want %q", name, p.Name, target)
			}
			return p.Port
		}
	}
	t.Fatalf("Service %s has no port to %s", name, target)
	return 0
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
		args: []string{"--set", "rbac.create=false"},
		check: func(t *testing.T, m manifest, _ operator) {
			for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				if n := len(m.ofKind(kind)); n != 0 {
					t.Errorf("%d objects of kind %s", n, kind)
				}
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

// checkServiceMonitor asserts that the ServiceMonitor selects the metrics
// Service, and only it, and scrapes its port.
func checkServiceMonitor(t *testing.T, m manifest, _ operator) {
	t.Helper()
	sms := m.ofKind("ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(sms))
	}
	sm := sms[0]
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("the ServiceMonitor lacks the labels of the values: %v", sm.GetLabels())
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	var selected []string
	for _, svc := range m.ofKind("Service") {
		if labelsMatch(svc.GetLabels(), selector) {
			selected = append(selected, svc.GetName())
		}
	}
	if !slices.Equal(selected, []string{"stackyard-metrics"}) {
		t.Errorf("the ServiceMonitor selects Services %v, want [stackyard-metrics]", selected)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["interval"] != "30s" {
		t.Errorf("the ServiceMonitor's endpoints are %v, want the port metrics every 30s", endpoints)
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

// TestRenderRefusesBadValues: values the chart cannot act on stop the
// render with a message naming them, rather than a broken install.
func TestRenderRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, want string }{
		// With serviceAccount.create=false the chart cannot guess the name.
		{"serviceAccount.create=false", "serviceAccount.name must name an existing ServiceAccount"},
		// values.schema.json: a misspelt key, an unknown runtime, a
		// duration the operator would refuse.
		{"replicas=2", "additional properties 'replicas' not allowed"},
		{"runtime=docker", "/runtime"},
		{"idleAfter=5minutes", "/idleAfter"},
		{"workspaces.namespaces={Bad_NS}", "/workspaces/namespaces/0"},
		{"watchNamespaces={apps,Bad_NS}", "/watchNamespaces/1"},
		{"watchNamespaces={apps,apps}", "/watchNamespaces"},
		{"maxAgents=-1", "/maxAgents"},
	} {
		_, err := runHelm(t, nil, "template", release, chartDir(), "--set", tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template --set %s: %v, want an error saying %q", tc.set, err, tc.want)
		}
	}
}

// isWorkspaceObject reports whether u is made for workspace pods
// (workspaces.namespaces), not for the operator.
func isWorkspaceObject(u *unstructured.Unstructured) bool {
	return u.GetLabels()["app.kubernetes.io/component"] == "workspace"
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}
