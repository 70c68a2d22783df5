package docscheck

// The names the checks accept beyond our CLI and CRDs: Kubernetes'
// built-in resources, other projects' kinds and programs' flags that the
// docs legitimately name, and what kubectl's command lines are made of.
// Each entry says where the docs use it.

// builtinResources are the built-in Kubernetes resources the docs name
// to kubectl, by every name kubectl accepts for them that the docs use
// (plural, singular, short name).
var builtinResources = set(
	"all",
	"pods", "pod", "po",
	"secrets", "secret",
	"configmaps", "configmap", "cm",
	"namespaces", "namespace", "ns",
	"deployments", "deployment", "deploy",
	"events", "event", "ev",
	"serviceaccounts", "serviceaccount", "sa",
	"services", "service", "svc",
	"statefulsets", "statefulset", "sts",
	"persistentvolumeclaims", "persistentvolumeclaim", "pvc",
	"nodes", "node", "no",
	"roles", "role",
	"rolebindings", "rolebinding",
	"clusterroles", "clusterrole",
	"clusterrolebindings", "clusterrolebinding",
	"leases", "lease",
	"jobs", "job",
	"crd", "crds", "customresourcedefinitions", "customresourcedefinition",
	"validatingadmissionpolicies", "validatingadmissionpolicy",
	"validatingadmissionpolicybindings", "validatingadmissionpolicybinding",
	"mutatingwebhookconfigurations", "mutatingwebhookconfiguration",
	"validatingwebhookconfigurations", "validatingwebhookconfiguration",
	"networkpolicies", "networkpolicy", "netpol",
	"storageclasses", "storageclass", "sc",
	"tokenreviews", "subjectaccessreviews",
)

// crdResources are the names of the built-in CustomResourceDefinition
// resource: `kubectl get crd NAME` names a CRD, whose name must be one of
// ours.
var crdResources = set("crd", "crds", "customresourcedefinitions", "customresourcedefinition")

// foreignResources are the resources of other projects' CRDs that the
// docs legitimately name to kubectl, each with the project it belongs to.
var foreignResources = map[string]string{
	// Argo CD (argoproj.io): docs/argocd.md.
	"applications": "Argo CD Application",
	"application":  "Argo CD Application",
	"app":          "Argo CD Application",
	// Flux (kustomize.toolkit.fluxcd.io, source.toolkit.fluxcd.io): docs/flux.md.
	"kustomizations":  "Flux Kustomization",
	"kustomization":   "Flux Kustomization",
	"ks":              "Flux Kustomization",
	"gitrepositories": "Flux GitRepository",
	"gitrepository":   "Flux GitRepository",
}

// kubectlGenerators are what `kubectl create` makes from flags (its
// subcommands); `kubectl create -f` is not checked.
var kubectlGenerators = set(
	"clusterrole", "clusterrolebinding", "configmap", "cm", "cronjob", "deployment", "deploy", "ingress",
	"job", "namespace", "ns", "poddisruptionbudget", "pdb", "priorityclass", "quota", "role", "rolebinding",
	"secret", "service", "svc", "serviceaccount", "sa", "token",
)

// kubectlValueFlags are kubectl's flags that take a value, by long name,
// with the shorthands mapped to them in kubectlShorthands. A flag the
// docs use without "=" must be in this list or kubectlBoolFlags, so that
// the command line is read right (is the next word its value?); Kubectl
// says so when one is missing.
var kubectlValueFlags = set(
	"namespace", "output", "selector", "field-selector", "for", "timeout", "type", "patch", "filename",
	"kustomize", "context", "kubeconfig", "as", "as-group", "as-uid", "container", "sort-by", "subresource",
	"label-columns", "chunk-size", "template", "resource-version", "field-manager", "api-version", "cascade",
	"grace-period", "server", "token", "user", "cluster", "request-timeout", "image", "image-pull-policy",
	"restart", "replicas", "clusterrole", "serviceaccount", "group", "from-literal", "from-file", "duration",
	"dry-run", "role", "audience", "since", "tail", "port", "current-replicas", "patch-file",
)

// kubectlBoolFlags are kubectl's flags that take no value (or only one
// after "=").
var kubectlBoolFlags = set(
	"all-namespaces", "watch", "watch-only", "overwrite", "all", "show-labels", "server-side", "force-conflicts",
	"ignore-not-found", "recursive", "local", "list", "wait", "force", "no-headers", "show-kind", "help",
	"previous", "follow", "stdin", "tty", "rm", "quiet", "validate", "prune", "show-managed-fields",
	"output-watch-events",
)

// kubectlShorthands map kubectl's one-letter flags to their long names.
var kubectlShorthands = map[byte]string{
	'n': "namespace", 'o': "output", 'l': "selector", 'f': "filename", 'k': "kustomize", 'p': "patch",
	'c': "container", 'w': "watch", 'A': "all-namespaces", 'R': "recursive", 'L': "label-columns",
	'h': "help", 'i': "stdin", 't': "tty", 's': "server", 'q': "quiet",
}

// kubectlResourceVerbs are the kubectl verbs whose first argument names
// resources.
var kubectlResourceVerbs = set("get", "describe", "explain", "edit", "patch", "delete", "annotate", "label", "wait", "apply", "create", "scale")

// podVerbs are the kubectl verbs that take a pod's name, or a TYPE/NAME
// whose pod they pick.
var podVerbs = set("logs", "port-forward", "exec", "attach", "debug")

// set is a set of names.
func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// foreignFlags are the flags of other programs that the docs write alone
// in inline code, each with its program. Every other lone flag must be a
// stackyard command's.
var foreignFlags = map[string]string{ //nolint:gosec // flag names and the programs they belong to, not credentials
	"authorization-mode":         "kube-apiserver (docs/cluster.md)",
	"oidc-issuer-url":            "kube-apiserver (docs/dashboard.md)",
	"oidc-client-id":             "kube-apiserver (docs/dashboard.md)",
	"pass-authorization-header":  "oauth2-proxy (docs/dashboard.md, docs/install.md)",
	"use-language-version-tools": "pulumi install (docs/container-images.md)",
	"sort":                       "tar, building the image layers (docs/container-images.md)",
	"owner":                      "tar, building the image layers (docs/container-images.md)",
	"mtime":                      "tar, building the image layers (docs/container-images.md)",
	"server-side":                "kubectl apply (docs/install.md)",
	"force-conflicts":            "kubectl apply (docs/migration.md)",
	"program-fs-adv-addr":        "the Pulumi Kubernetes Operator's manager (docs/migration.md)",
}
