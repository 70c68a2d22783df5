package kubernetes

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/stackyard/stackyard/internal/reconcile"
)

// mergePodSpec applies the user's spec.podTemplate.spec to the generated
// pod spec as a strategic merge patch: lists such as containers, volumes
// and env merge by name, so a template can add a sidecar or an env var to
// the "pulumi" container without repeating the rest. A template that cannot
// be applied stalls the Workspace.
func mergePodSpec(base corev1.PodSpec, tmpl *corev1.PodSpec) (corev1.PodSpec, error) {
	if tmpl == nil {
		return base, nil
	}
	invalid := func(err error) error {
		return reconcile.NewStalling(reconcile.StalledSpecInvalidReason, fmt.Errorf("spec.podTemplate.spec: %w", err))
	}
	for field, names := range map[string][]string{
		"containers":     containerNames(tmpl.Containers),
		"initContainers": containerNames(tmpl.InitContainers),
		"volumes":        volumeNames(tmpl.Volumes),
	} {
		for i, name := range names {
			if name == "" {
				return base, invalid(fmt.Errorf("%s[%d]: a name is required to merge it", field, i))
			}
		}
	}
	orig, err := json.Marshal(base)
	if err != nil {
		return base, err
	}
	patch, err := patchOf(tmpl)
	if err != nil {
		return base, invalid(err)
	}
	out, err := strategicpatch.StrategicMergePatch(orig, patch, corev1.PodSpec{})
	if err != nil {
		return base, invalid(err)
	}
	var merged corev1.PodSpec
	if err := json.Unmarshal(out, &merged); err != nil {
		return base, invalid(err)
	}
	return merged, nil
}

// patchOf serializes a template as a patch. A typed PodSpec writes its
// unset required lists (containers) as null, which a merge patch reads as
// "delete"; nulls are dropped, so only what the user set takes part.
func patchOf(tmpl *corev1.PodSpec) ([]byte, error) {
	b, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return json.Marshal(prune(m))
}

// prune removes the nulls of a decoded JSON value. Empty objects stay:
// "emptyDir: {}" means something.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			t[k] = prune(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = prune(e)
		}
		return t
	default:
		return v
	}
}

// containerNames lists the names of cs, in order.
func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// volumeNames lists the names of vs, in order.
func volumeNames(vs []corev1.Volume) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}
