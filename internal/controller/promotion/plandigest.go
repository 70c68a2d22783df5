package promotion

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// The digest reads the Secrets and ConfigMaps the Stacks reference, for
// their resourceVersion only.
//
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get

// planInput is one input of what a promotion would apply: a name that
// says what it is and a value that changes whenever it does.
type planInput struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// stackInputs are the fields of a Stack's spec that decide what an update
// of it does, apart from the commit the promotion pins. Secret values
// given inline (spec.secrets) are hashed like the rest; those read from
// Secrets and ConfigMaps are represented by the objects' resourceVersion.
type stackInputs struct {
	Stack             string                          `json:"stack"`
	Backend           string                          `json:"backend,omitempty"`
	ProjectRepo       string                          `json:"projectRepo,omitempty"`
	RepoDir           string                          `json:"repoDir,omitempty"`
	Config            map[string]apiextensionsv1.JSON `json:"config,omitempty"`
	ConfigRef         map[string]shared.ConfigMapRef  `json:"configRef,omitempty"`
	Secrets           map[string]string               `json:"secrets,omitempty"`
	SecretRefs        map[string]shared.ResourceRef   `json:"secretsRef,omitempty"`
	SecretsProvider   string                          `json:"secretsProvider,omitempty"`
	Envs              []string                        `json:"envs,omitempty"`
	SecretEnvs        []string                        `json:"envSecrets,omitempty"`
	EnvRefs           map[string]shared.ResourceRef   `json:"envRefs,omitempty"`
	AccessTokenSecret string                          `json:"accessTokenSecret,omitempty"`
	Environment       []string                        `json:"environment,omitempty"`
	Targets           []string                        `json:"targets,omitempty"`
	TargetDependents  bool                            `json:"targetDependents,omitempty"`
	Refresh           bool                            `json:"refresh,omitempty"`
	ProgramRef        *shared.ProgramReference        `json:"programRef,omitempty"`
	FluxSource        *shared.FluxSource              `json:"fluxSource,omitempty"`
	Prerequisites     []shared.PrerequisiteRef        `json:"prerequisites,omitempty"`
}

// planDigest identifies what the promotion would apply: a sha256 over its
// inputs, in order. They are the release's commit; for each Stack of the
// stage, the fields of its spec that decide what an update does; and the
// resourceVersion of every Secret and ConfigMap it reads (a missing one
// counts as such). Any change of an input gives a new digest, so an
// approval given for the old one no longer counts. Stacks, Secrets and
// ConfigMaps are read live, not from the cache. The previews' plans are
// inputs too (planInputs, plan.go): the digest of each plan the Stacks
// will be held to, so a new preview makes older approvals stop counting.
func (s *session) planDigest(ctx context.Context) (string, error) {
	inputs := []planInput{{Name: "release", Value: s.release.Spec.Commit.SHA}}
	for _, b := range s.stage.Spec.Stacks {
		stack, err := get(ctx, s.r.APIReader, s.p.Namespace, "Stack", b.Name, &pulumiv1.Stack{})
		if err != nil {
			return "", err
		}
		if stack == nil {
			inputs = append(inputs, planInput{Name: "Stack/" + b.Name})
			continue
		}
		own, err := s.stackInputs(ctx, stack)
		if err != nil {
			return "", err
		}
		inputs = append(inputs, own...)
	}
	plans, err := s.planInputs(ctx)
	if err != nil {
		return "", err
	}
	return digestOf(append(inputs, plans...))
}

// stackInputs are the inputs of one Stack: the fields of its spec that
// decide what an update does, and the resourceVersion of every Secret and
// ConfigMap it reads, read live.
func (s *session) stackInputs(ctx context.Context, stack *pulumiv1.Stack) ([]planInput, error) {
	inputs := []planInput{{Name: "Stack/" + stack.Name, Value: inputsOf(&stack.Spec)}}
	for _, ref := range referencedObjects(&stack.Spec) {
		version, err := s.resourceVersion(ctx, ref)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, planInput{Name: ref.kind + "/" + ref.name, Value: version})
	}
	return inputs, nil
}

// stackDigest is the digest of stackInputs: what a preview of the Stack
// records, and compares before the promotion starts.
func (s *session) stackDigest(ctx context.Context, stack *pulumiv1.Stack) (string, error) {
	inputs, err := s.stackInputs(ctx, stack)
	if err != nil {
		return "", err
	}
	return digestOf(inputs)
}

// digestOf is a sha256 over inputs, in order.
func digestOf(inputs []planInput) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, in := range inputs {
		if err := enc.Encode(in); err != nil {
			return "", fmt.Errorf("digesting %s: %w", in.Name, err)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// inputsOf copies the fields of spec that decide what an update does.
func inputsOf(spec *shared.StackSpec) stackInputs {
	in := stackInputs{
		Stack: spec.Stack, Backend: spec.Backend,
		Config: spec.Config, ConfigRef: spec.ConfigRef, Secrets: spec.Secrets, SecretRefs: spec.SecretRefs, SecretsProvider: spec.SecretsProvider,
		Envs: spec.Envs, SecretEnvs: spec.SecretEnvs, EnvRefs: spec.EnvRefs, AccessTokenSecret: spec.AccessTokenSecret, Environment: spec.Environment,
		Targets: spec.Targets, TargetDependents: spec.TargetDependents, Refresh: spec.Refresh,
		ProgramRef: spec.ProgramRef, FluxSource: spec.FluxSource, Prerequisites: spec.Prerequisites,
	}
	if spec.GitSource != nil {
		in.ProjectRepo, in.RepoDir = spec.GitSource.ProjectRepo, spec.GitSource.RepoDir
	}
	return in
}

// objectRef is a Secret or ConfigMap of the Stack's namespace.
type objectRef struct{ kind, name string }

// referencedObjects lists the Secrets and ConfigMaps spec reads values
// from, each once, in a stable order.
func referencedObjects(spec *shared.StackSpec) []objectRef {
	var refs []objectRef
	secret := func(ref shared.ResourceRef) {
		if ref.SelectorType == shared.ResourceSelectorSecret && ref.SecretRef != nil {
			refs = append(refs, objectRef{"Secret", ref.SecretRef.Name})
		}
	}
	if spec.AccessTokenSecret != "" {
		refs = append(refs, objectRef{"Secret", spec.AccessTokenSecret})
	}
	for _, name := range spec.Envs {
		refs = append(refs, objectRef{"ConfigMap", name})
	}
	for _, name := range spec.SecretEnvs {
		refs = append(refs, objectRef{"Secret", name})
	}
	for _, ref := range spec.EnvRefs {
		secret(ref)
	}
	for _, ref := range spec.ConfigRef {
		refs = append(refs, objectRef{"ConfigMap", ref.Name})
	}
	for _, ref := range spec.SecretRefs {
		secret(ref)
	}
	slices.SortFunc(refs, func(a, b objectRef) int {
		return cmp.Or(strings.Compare(a.kind, b.kind), strings.Compare(a.name, b.name))
	})
	return slices.Compact(refs)
}

// resourceVersion is the resourceVersion of the object ref names, or ""
// when it does not exist.
func (s *session) resourceVersion(ctx context.Context, ref objectRef) (string, error) {
	if ref.kind == "Secret" {
		sec, err := get(ctx, s.r.APIReader, s.p.Namespace, ref.kind, ref.name, &corev1.Secret{})
		if err != nil || sec == nil {
			return "", err
		}
		return sec.ResourceVersion, nil
	}
	cm, err := get(ctx, s.r.APIReader, s.p.Namespace, ref.kind, ref.name, &corev1.ConfigMap{})
	if err != nil || cm == nil {
		return "", err
	}
	return cm.ResourceVersion, nil
}
