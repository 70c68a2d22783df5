package stackrun

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
)

// StackNameLabel marks the objects made for a Stack (Workspace, Updates) with
// the Stack's name, so they can be listed and the Stack found from them.
const StackNameLabel = "pulumi.com/stack-name"

// AccessTokenKey is the key of the deprecated accessTokenSecret Secret.
const AccessTokenKey = "accessToken"

// Source is where the Workspace fetches the program, as resolved from the
// Stack's projectRepo, fluxSource or programRef.
type Source struct {
	// Git is set for projectRepo stacks; Ref is the resolved commit.
	Git *autov1alpha1.GitSource
	// Flux is set for fluxSource and programRef stacks: an artifact URL and
	// its digest.
	Flux *autov1alpha1.FluxSource
	// Project is set when only a project file is needed (destroying a stack
	// whose source is gone).
	Project *autov1alpha1.ProjectInfo
	// Revision identifies what the source holds (commit or artifact
	// revision); it is what lastUpdate.lastAttemptedCommit records.
	Revision string
	// Watched says that a change of the source wakes the Stack: a watch on
	// its Program or Flux source, the branch watch (branches), or a pinned
	// commit, which only a change of the spec moves. Such a Stack needs no
	// resync interval to notice a new revision (Observed.Watched).
	Watched bool
}

// WorkspaceName is the name of the Workspace kept for a Stack: the Stack's
// own name, as upstream, so that one can be found from the other.
func WorkspaceName(stack *pulumiv1.Stack) string { return stack.Name }

// BuildWorkspace returns the Workspace a Stack needs: its source, its
// environment and its one stack with config and secrets, with the Stack's
// workspaceTemplate merged on top. Secret values are never copied into the
// Workspace: Secret-backed settings become environment variables that read
// the Secret where the agent runs. A setting the runtime cannot honour is a
// Stalling error naming the field.
func BuildWorkspace(stack *pulumiv1.Stack, src Source) (*autov1alpha1.Workspace, error) {
	spec := &stack.Spec
	b := &workspaceBuilder{}
	b.ws = &autov1alpha1.Workspace{
		TypeMeta: metav1.TypeMeta{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      WorkspaceName(stack),
			Namespace: stack.Namespace,
			Labels:    map[string]string{StackNameLabel: stack.Name},
		},
		Spec: autov1alpha1.WorkspaceSpec{
			ServiceAccountName: spec.ServiceAccountName,
			Git:                src.Git,
			Flux:               src.Flux,
			ProjectInfo:        src.Project,
		},
	}
	// The Workspace is served by the Stack's shard.
	shard.Stamp(stack, b.ws)
	b.environment(spec)
	b.stack(spec)
	if b.err != nil {
		return nil, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason, b.err)
	}
	ws, err := applyWorkspaceTemplate(b.ws, spec.WorkspaceTemplate)
	if err != nil {
		return nil, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason, fmt.Errorf("spec.workspaceTemplate: %w", err))
	}
	// Created held, as the Workspace controller would hold it before
	// starting anything for it: one write fewer per Workspace than adding
	// it on its first reconcile.
	sreconcile.AddFinalizer(ws, autov1alpha1.WorkspaceFinalizer)
	return ws, nil
}

// workspaceBuilder accumulates the Workspace and the first error.
type workspaceBuilder struct {
	ws  *autov1alpha1.Workspace
	err error
}

func (b *workspaceBuilder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
}

// environment maps backend, accessTokenSecret, envs, envSecrets and envRefs.
func (b *workspaceBuilder) environment(spec *shared.StackSpec) {
	ws := &b.ws.Spec
	if spec.Backend != "" {
		ws.Env = append(ws.Env, corev1.EnvVar{Name: "PULUMI_BACKEND_URL", Value: spec.Backend})
	}
	if spec.AccessTokenSecret != "" {
		ws.Env = append(ws.Env, secretEnv("PULUMI_ACCESS_TOKEN", spec.AccessTokenSecret, AccessTokenKey))
	}
	for _, name := range spec.Envs {
		ws.EnvFrom = append(ws.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
	}
	for _, name := range spec.SecretEnvs {
		ws.EnvFrom = append(ws.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
	}
	for _, name := range sortedKeys(spec.EnvRefs) {
		ref := spec.EnvRefs[name]
		field := fmt.Sprintf("spec.envRefs[%s]", name)
		if !b.selected(field, &ref) {
			return
		}
		switch ref.SelectorType {
		case shared.ResourceSelectorLiteral:
			ws.Env = append(ws.Env, corev1.EnvVar{Name: name, Value: ref.LiteralRef.Value})
		case shared.ResourceSelectorSecret:
			if !b.sameNamespace(field, ref.SecretRef) {
				return
			}
			ws.Env = append(ws.Env, secretEnv(name, ref.SecretRef.Name, ref.SecretRef.Key))
		default:
			b.fail("%s: type %s is not supported for environment variables; use Literal or Secret", field, ref.SelectorType)
			return
		}
	}
	ws.Env = lastByName(ws.Env)
}

// lastByName keeps, of variables with the same name, the last one: an
// explicit envRefs entry overrides what backend or the deprecated
// accessTokenSecret set, and the API server refuses duplicate names.
func lastByName(env []corev1.EnvVar) []corev1.EnvVar {
	last := map[string]int{}
	for i, e := range env {
		last[e.Name] = i
	}
	out := env[:0:0]
	for i, e := range env {
		if last[e.Name] == i {
			out = append(out, e)
		}
	}
	return out
}

// selected checks that a ResourceRef sets the selector its type names (the
// API server's schema says so too, but an object stored under an older
// schema may not).
func (b *workspaceBuilder) selected(field string, ref *shared.ResourceRef) bool {
	var set bool
	var name string
	switch ref.SelectorType {
	case shared.ResourceSelectorLiteral:
		set, name = ref.LiteralRef != nil, "literal"
	case shared.ResourceSelectorSecret:
		set, name = ref.SecretRef != nil, "secret"
	case shared.ResourceSelectorEnv:
		set, name = ref.Env != nil, "env"
	case shared.ResourceSelectorFS:
		set, name = ref.FileSystem != nil, "filesystem"
	default:
		b.fail("%s.type: %q is not one of Literal, Secret, Env, FS", field, ref.SelectorType)
		return false
	}
	if !set {
		b.fail("%s.%s: required when type is %s", field, name, ref.SelectorType)
	}
	return set
}

// sameNamespace refuses Secret references into other namespaces: a Stack
// may only read Secrets of its own namespace.
func (b *workspaceBuilder) sameNamespace(field string, sel *shared.SecretSelector) bool {
	if sel.Namespace != "" && sel.Namespace != b.ws.Namespace {
		b.fail("%s.secret.namespace: %q is not the Stack's namespace; only Secrets of the same namespace can be used", field, sel.Namespace)
		return false
	}
	return true
}

// stack builds the Workspace's one stack: name, creation, secrets provider,
// config, configRef, secrets, secretsRef and ESC environments.
func (b *workspaceBuilder) stack(spec *shared.StackSpec) {
	b.uniqueKeys(spec)
	st := autov1alpha1.WorkspaceStack{
		Name:        spec.Stack,
		Create:      ptr.To(!spec.UseLocalStackOnly),
		Environment: spec.Environment,
	}
	if spec.SecretsProvider != "" {
		st.SecretsProvider = ptr.To(spec.SecretsProvider)
	}
	for _, key := range sortedKeys(spec.Config) {
		v := spec.Config[key]
		st.Config = append(st.Config, autov1alpha1.ConfigItem{Key: key, Value: v.DeepCopy()})
	}
	for _, key := range sortedKeys(spec.ConfigRef) {
		ref := spec.ConfigRef[key]
		env := b.refEnv("CONFIGREF", key, corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}, Key: ref.Key,
		}})
		st.Config = append(st.Config, autov1alpha1.ConfigItem{Key: key, ValueFrom: &autov1alpha1.ConfigValueFrom{Env: env, JSON: ptr.Deref(ref.JSON, false)}})
	}
	for _, key := range sortedKeys(spec.Secrets) {
		st.Config = append(st.Config, autov1alpha1.ConfigItem{Key: key, Value: jsonString(spec.Secrets[key]), Secret: ptr.To(true)})
	}
	for _, key := range sortedKeys(spec.SecretRefs) {
		ref := spec.SecretRefs[key]
		field := fmt.Sprintf("spec.secretsRef[%s]", key)
		item := autov1alpha1.ConfigItem{Key: key, Secret: ptr.To(true)}
		if !b.selected(field, &ref) {
			return
		}
		switch ref.SelectorType {
		case shared.ResourceSelectorLiteral:
			item.Value = jsonString(ref.LiteralRef.Value)
		case shared.ResourceSelectorSecret:
			if !b.sameNamespace(field, ref.SecretRef) {
				return
			}
			env := b.refEnv("SECRETREF", key, corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.SecretRef.Name}, Key: ref.SecretRef.Key,
			}})
			item.ValueFrom = &autov1alpha1.ConfigValueFrom{Env: env}
		case shared.ResourceSelectorEnv:
			item.ValueFrom = &autov1alpha1.ConfigValueFrom{Env: ref.Env.Name}
		case shared.ResourceSelectorFS:
			item.ValueFrom = &autov1alpha1.ConfigValueFrom{Path: ref.FileSystem.Path}
		}
		st.Config = append(st.Config, item)
	}
	b.ws.Spec.Stacks = []autov1alpha1.WorkspaceStack{st}
}

// uniqueKeys fails a spec that sets one configuration key in two of
// config, configRef, secrets and secretsRef, naming the later field and the
// key. The API server refuses most such specs already (see StackSpec); it
// cannot see into config, and a Stack stored before that rule existed is
// still read.
func (b *workspaceBuilder) uniqueKeys(spec *shared.StackSpec) {
	fields := []struct {
		name string
		keys []string
	}{
		{"spec.config", sortedKeys(spec.Config)},
		{"spec.configRef", sortedKeys(spec.ConfigRef)},
		{"spec.secrets", sortedKeys(spec.Secrets)},
		{"spec.secretsRef", sortedKeys(spec.SecretRefs)},
	}
	setIn := map[string]string{}
	for _, f := range fields {
		for _, key := range f.keys {
			if first, dup := setIn[key]; dup {
				b.fail("%s[%s]: the key is also set in %s; set each configuration key in one place", f.name, key, first)
				return
			}
			setIn[key] = f.name
		}
	}
}

// refEnv adds an environment variable that reads src where the agent runs
// and returns its name, so a config value can come from it without the
// value passing through the Workspace object.
func (b *workspaceBuilder) refEnv(kind, key string, src corev1.EnvVarSource) string {
	// The hash keeps keys that differ only in punctuation ("a:b", "a.b")
	// apart once mapped to an environment variable name.
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	name := fmt.Sprintf("STACKYARD_%s_%s_%08X", kind, envSafe(key), h.Sum32())
	b.ws.Spec.Env = append(b.ws.Spec.Env, corev1.EnvVar{Name: name, ValueFrom: &src})
	return name
}

// applyWorkspaceTemplate merges the Stack's workspaceTemplate onto ws as a
// strategic merge patch, the way upstream documents it: lists of env and
// stacks merge by name, scalars replace.
func applyWorkspaceTemplate(ws *autov1alpha1.Workspace, tmpl *autov1alpha1.WorkspaceTemplate) (*autov1alpha1.Workspace, error) {
	if tmpl == nil {
		return ws, nil
	}
	original, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, &autov1alpha1.Workspace{})
	if err != nil {
		return nil, err
	}
	out := &autov1alpha1.Workspace{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	// The template may add labels but not take the Stack's own away.
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[StackNameLabel] = ws.Labels[StackNameLabel]
	shard.Stamp(ws, out)
	out.Name, out.Namespace = ws.Name, ws.Namespace
	if pt := out.Spec.PodTemplate; pt != nil && pt.Spec != nil && pt.Spec.Containers == nil {
		// A template that sets, say, only a securityContext has no
		// containers, and the typed pod spec would be sent as
		// "containers: null", which the API server refuses. An empty list
		// is what the template means: nothing to merge into the
		// runtime's containers.
		pt.Spec.Containers = []corev1.Container{}
	}
	return out, nil
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

func jsonString(s string) *apiextensionsv1.JSON {
	raw, _ := json.Marshal(s)
	return &apiextensionsv1.JSON{Raw: raw}
}

// envSafe turns a config key ("aws:region", "app:db.password") into the
// upper-case letters, digits and underscores of an environment variable.
func envSafe(key string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, key)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
