package helm_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/stackyard/stackyard/internal/cli"
	"github.com/stackyard/stackyard/internal/leader"
)

// What the rendered operator must be, whatever the values: its Deployment
// decoded with the flags it passes, checked against the operator's own
// command line; shared by the render tests.

// listenerFlags maps each named container port of the operator to the
// flag that makes it listen there.
var listenerFlags = map[string]string{
	"metrics":   "metrics-bind-address",
	"probes":    "health-probe-bind-address",
	"artifacts": "artifact-listen",
	"cloud-api": "cloud-api-bind-address",
	"dashboard": "dashboard-bind-address",
	"receivers": "receiver-bind-address",
	"webhook":   "webhook-bind-address",
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
		if isWorkspaceObject(u) || isPeopleObject(u) {
			continue
		}
		if u.GetName() != sa || u.GetNamespace() != ns {
			t.Errorf("ServiceAccount %s/%s rendered, the pod runs as %s/%s", u.GetNamespace(), u.GetName(), ns, sa)
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range m.ofKind(kind) {
			if isWorkspaceObject(u) || isPeopleObject(u) {
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

// isWorkspaceObject reports whether u is made for workspace pods
// (workspaces.namespaces), not for the operator.
func isWorkspaceObject(u *unstructured.Unstructured) bool {
	return u.GetLabels()["app.kubernetes.io/component"] == "workspace"
}

// isPeopleObject tells the roles for people (and their approvers'
// bindings) from the operator's own RBAC.
func isPeopleObject(u *unstructured.Unstructured) bool {
	return u.GetLabels()["app.kubernetes.io/component"] == "people"
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

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}
