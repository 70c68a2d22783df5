package change

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/agent/readset"
)

// InputsAnnotation, on a Stack a promotion pinned, is the digest of what
// that promotion previewed and its approvers were shown (PinDigest): the
// Stack's inputs apart from the commit, and the plan its up is held to. The
// Stack runs that up only while what it reads still has this digest.
const InputsAnnotation = "promotion.stackyard.dev/plan-inputs"

// Input is one input of what an update does: a name that says what it is
// and a value that changes whenever it does.
type Input struct {
	// Name says what the input is ("Stack/web", "Secret/creds").
	Name string `json:"name"`
	// Value changes whenever the input does.
	Value any `json:"value"`
}

// ObjectRef is a Secret or ConfigMap of a Stack's namespace that its
// update reads.
type ObjectRef struct {
	// Kind is "Secret" or "ConfigMap".
	Kind string
	// Name is the object's name.
	Name string
}

// String is "Kind/name".
func (r ObjectRef) String() string { return r.Kind + "/" + r.Name }

// StackInputs are what an update of stack does depends on, apart from the
// commit a promotion pins: its whole spec with spec.commit left out (so a
// field added to the API later is covered without anyone listing it), and
// the resourceVersion of every Secret and ConfigMap the spec names
// (ReferencedObjects; "" for one that does not exist), read through r.
// Secret values given inline (spec.secrets) are hashed with the rest of the
// spec and never leave the digest.
func StackInputs(ctx context.Context, r client.Reader, stack *pulumiv1.Stack) ([]Input, error) {
	spec, err := specWithoutCommit(&stack.Spec)
	if err != nil {
		return nil, err
	}
	inputs := []Input{{Name: "Stack/" + stack.Name, Value: spec}}
	for _, ref := range ReferencedObjects(&stack.Spec) {
		version, err := resourceVersion(ctx, r, stack.Namespace, ref)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, Input{Name: ref.String(), Value: version})
	}
	return inputs, nil
}

// Reads are the versions of the Secrets and ConfigMaps among inputs, in
// the shape the agent checks them in (readset).
func Reads(inputs []Input) readset.Set {
	out := readset.Set{}
	for _, in := range inputs {
		kind, name, _ := strings.Cut(in.Name, "/")
		if v, ok := in.Value.(string); ok && (kind == "Secret" || kind == "ConfigMap") {
			out.Add(kind, name, v)
		}
	}
	return out
}

// StackDigest is the Digest of StackInputs: what a promotion's preview of
// the Stack records (its StackPromotion's preview.inputs) and compares before it
// starts.
func StackDigest(ctx context.Context, r client.Reader, stack *pulumiv1.Stack) (string, error) {
	inputs, err := StackInputs(ctx, r, stack)
	if err != nil {
		return "", err
	}
	return Digest(inputs)
}

// Digest is a sha256 over inputs, in order, as "sha256:<hex>".
func Digest(inputs []Input) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, in := range inputs {
		if err := enc.Encode(in); err != nil {
			return "", fmt.Errorf("digesting %s: %w", in.Name, err)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// reviewedKeys are the keys of a promotion's plan Secret that PlanDigest
// covers: the plan a Stack is held to, and the value diff and the code
// patch the approvers read, so that an approval is bound to what they saw.
var reviewedKeys = []string{autov1alpha1.PlanKey, autov1alpha1.DiffKey, promotionv1alpha1.SourcePatchKey}

// PlanDigest is the sha256 of what a promotion's plan Secret holds under
// its reviewed keys, "" when the Secret is nil (gone).
func PlanDigest(sec *corev1.Secret) string {
	if sec == nil {
		return ""
	}
	h := sha256.New()
	for _, key := range reviewedKeys {
		fmt.Fprintf(h, "%s:%d:", key, len(sec.Data[key]))
		h.Write(sec.Data[key])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// PinDigest is what InputsAnnotation holds: the digest of a Stack's inputs
// (StackDigest) and of the plan Secret it is held to (PlanDigest).
func PinDigest(stackDigest, planDigest string) (string, error) {
	return Digest([]Input{{Name: "inputs", Value: stackDigest}, {Name: "plan", Value: planDigest}})
}

// specWithoutCommit is spec as JSON, without spec.commit.
func specWithoutCommit(spec *shared.StackSpec) (map[string]any, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the Stack's spec: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding the Stack's spec: %w", err)
	}
	delete(m, "commit")
	return m, nil
}

// ReferencedObjects lists the Secrets and ConfigMaps a Stack's update
// reads, each once, sorted: the ones its fields name by kind (envs,
// envSecrets, accessTokenSecret, gitAuthSecret, configRef), and every
// reference found anywhere in the spec in the shapes the API uses for
// them: a ResourceRef's or a volume's "secret", a "configMap" volume,
// "secretKeyRef", "secretRef", "configMapKeyRef", "configMapRef" (env
// and envFrom of the workspace template) and "imagePullSecrets". Naming an
// object the update does not read costs only a preview more when it
// changes; missing one would let it change unseen.
func ReferencedObjects(spec *shared.StackSpec) []ObjectRef {
	var refs []ObjectRef
	add := func(kind string, names ...string) {
		for _, n := range names {
			if n != "" {
				refs = append(refs, ObjectRef{Kind: kind, Name: n})
			}
		}
	}
	add("Secret", spec.AccessTokenSecret)
	if spec.GitSource != nil {
		add("Secret", spec.GitAuthSecret)
	}
	add("Secret", spec.SecretEnvs...)
	add("ConfigMap", spec.Envs...)
	for _, ref := range spec.ConfigRef {
		add("ConfigMap", ref.Name)
	}
	if data, err := json.Marshal(spec); err == nil {
		var doc any
		if json.Unmarshal(data, &doc) == nil {
			walkReferences(doc, add)
		}
	}
	slices.SortFunc(refs, func(a, b ObjectRef) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return slices.Compact(refs)
}

// referenceKinds maps the keys under which the API's types reference a
// Secret or ConfigMap by an object with a "name" (or "secretName") to the
// kind referenced.
var referenceKinds = map[string]string{
	"secret":          "Secret",
	"secretKeyRef":    "Secret",
	"secretRef":       "Secret",
	"configMap":       "ConfigMap",
	"configMapKeyRef": "ConfigMap",
	"configMapRef":    "ConfigMap",
}

// walkReferences calls add for every reference under doc, a decoded JSON
// document.
func walkReferences(doc any, add func(kind string, names ...string)) {
	switch v := doc.(type) {
	case map[string]any:
		for key, val := range v {
			if kind, ok := referenceKinds[key]; ok {
				if ref, ok := val.(map[string]any); ok {
					add(kind, stringOf(ref["name"]), stringOf(ref["secretName"]))
				}
			}
			if key == "imagePullSecrets" {
				if list, ok := val.([]any); ok {
					for _, item := range list {
						if ref, ok := item.(map[string]any); ok {
							add("Secret", stringOf(ref["name"]))
						}
					}
				}
			}
			walkReferences(val, add)
		}
	case []any:
		for _, item := range v {
			walkReferences(item, add)
		}
	}
}

// stringOf is v when it is a string, else "".
func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// resourceVersion is the resourceVersion of the object ref names in
// namespace, or "" when it does not exist.
func resourceVersion(ctx context.Context, r client.Reader, namespace string, ref ObjectRef) (string, error) {
	var obj client.Object = &corev1.ConfigMap{}
	if ref.Kind == "Secret" {
		obj = &corev1.Secret{}
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", ref, err)
	}
	return obj.GetResourceVersion(), nil
}
