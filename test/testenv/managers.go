package testenv

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FieldManagers lists the managers among obj's managedFields that own the
// field at path, given as managedFields writes it (e.g. "f:spec",
// "f:commit"): which controller, person or tool last applied or updated
// it.
func FieldManagers(obj metav1.Object, path ...string) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		var cur any = fields
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = m[p]
		}
		if cur != nil {
			out = append(out, e.Manager)
		}
	}
	return out
}
