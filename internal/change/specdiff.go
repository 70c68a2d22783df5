package change

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// Spec diffs. An approver of a held change sees what changed in the
// Stack's spec: the approved spec is kept, as a snapshot, in the Stack's
// status.approvedSpec (which only the operator writes), and a held change
// lists its differences from it in status.heldSpec.changes. Secret values
// given inline (spec.secrets, a ResourceRef's literal value, the git
// credentials' fields) are never kept: a snapshot holds a short digest of
// each instead, so that a change to one shows as a change without its
// value.

// MaxSpecChanges is how many differences status.heldSpec.changes lists.
const MaxSpecChanges = 50

// maxShownValue bounds the text of one value in a SpecChange.
const maxShownValue = 200

// secretKeys are keys whose string value is a secret wherever they are.
var secretKeys = map[string]bool{"password": true, "privateKey": true, "sshPrivateKey": true, "accessToken": true}

// SpecSnapshot is the spec, apart from spec.commit, as approvers may see
// it: every inline secret value replaced by "[secret <digest>]".
func SpecSnapshot(spec *shared.StackSpec) (*apiextensionsv1.JSON, error) {
	m, err := specWithoutCommit(spec)
	if err != nil {
		return nil, err
	}
	if secrets, ok := m["secrets"].(map[string]any); ok {
		for k, v := range secrets {
			secrets[k] = maskValue("secrets."+k, v)
		}
	}
	maskSecrets("", m)
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the Stack's spec: %w", err)
	}
	return &apiextensionsv1.JSON{Raw: raw}, nil
}

// maskSecrets masks, under v at path, every literal ResourceRef's value
// and every string under a key of secretKeys.
func maskSecrets(path string, v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			p := valuediff.PathJoin(path, k)
			switch {
			case k == "literal":
				if lit, ok := child.(map[string]any); ok {
					if val, ok := lit["value"]; ok {
						lit["value"] = maskValue(p+".value", val)
					}
				}
			case secretKeys[k]:
				if _, ok := child.(string); ok {
					t[k] = maskValue(p, child)
					continue
				}
				maskSecrets(p, child)
			default:
				maskSecrets(p, child)
			}
		}
	case []any:
		for i, child := range t {
			maskSecrets(fmt.Sprintf("%s[%d]", path, i), child)
		}
	}
}

// maskValue is what a snapshot keeps of the secret value v at path: a
// digest of both, short enough to tell a change, not the value.
func maskValue(path string, v any) string {
	data, _ := json.Marshal(v)
	h := sha256.Sum256(append([]byte(path+"\x00"), data...))
	return "[secret " + hex.EncodeToString(h[:])[:8] + "]"
}

// DiffSpecs lists how the snapshot next differs from the snapshot prev
// (SpecSnapshot's), field by field, sorted by path, at most
// MaxSpecChanges; truncated says some were left out. Lists are compared
// element by element.
func DiffSpecs(prev, next *apiextensionsv1.JSON) (changes []shared.SpecChange, truncated bool, err error) {
	var a, b any
	if prev != nil {
		if err := json.Unmarshal(prev.Raw, &a); err != nil {
			return nil, false, fmt.Errorf("decoding the approved spec: %w", err)
		}
	}
	if next != nil {
		if err := json.Unmarshal(next.Raw, &b); err != nil {
			return nil, false, fmt.Errorf("decoding the spec: %w", err)
		}
	}
	diff("", a, b, &changes)
	slices.SortFunc(changes, func(x, y shared.SpecChange) int { return strings.Compare(x.Path, y.Path) })
	if len(changes) > MaxSpecChanges {
		return changes[:MaxSpecChanges], true, nil
	}
	return changes, false, nil
}

// diff appends the differences between a and b at path.
func diff(path string, a, b any, out *[]shared.SpecChange) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Sorted(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			diff(valuediff.PathJoin(path, k), am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		for i := range max(len(al), len(bl)) {
			var x, y any
			if i < len(al) {
				x = al[i]
			}
			if i < len(bl) {
				y = bl[i]
			}
			diff(fmt.Sprintf("%s[%d]", path, i), x, y, out)
		}
		return
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		return
	}
	c := shared.SpecChange{Path: path, Op: shared.SpecChangeChanged}
	switch {
	case a == nil:
		c.Op = shared.SpecChangeAdded
	case b == nil:
		c.Op = shared.SpecChangeRemoved
	}
	if a != nil {
		c.Old = shown(ja)
	}
	if b != nil {
		c.New = shown(jb)
	}
	*out = append(*out, c)
}

// shown is a value's JSON, cut to maxShownValue.
func shown(data []byte) string {
	s := string(data)
	if len(s) > maxShownValue {
		return s[:maxShownValue] + "…"
	}
	return s
}
