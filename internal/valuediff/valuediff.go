// Package valuediff is the value diff of a preview: for each resource a
// preview would change, the changed properties with their old and new
// values, as `pulumi preview --diff` shows them, secrets masked.
//
// It is one contract across three boundaries: the Update controller builds
// it from the engine's resourcePreEvents (FromStep) and stores it, encoded
// (Encode), next to the plan the preview saved; the promotion copies it
// with the plan; the dashboard and the CLI decode it (Decode) for
// approvers.
//
// Secret values never appear: the engine blinds every value marked secret
// in its events (and everything derived from a secret is marked secret),
// and the agent masks the secret values it knows on top. A secret shows
// as "[secret]"; a changed secret shows as a change from "[secret]" to
// "[secret]", since the engine says it changed. Values the preview cannot
// know yet show as "[unknown]". Every value is bounded (MaxValue), and
// nested objects and arrays are diffed element by element, each leaf with
// its own path.
package valuediff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep a diff small enough to sit next to a plan in a Secret.
const (
	// MaxValue bounds a rendered value, in bytes.
	MaxValue = 1024
	// MaxProperties bounds the properties kept per resource.
	MaxProperties = 100
	// MaxResources bounds the resources kept per preview.
	MaxResources = 200
	// MaxEncoded bounds the encoded diff, in bytes; values are dropped
	// (ValuesDropped) past it.
	MaxEncoded = 256 << 10
)

// Kinds of a property change.
const (
	// KindAdd: the property is new.
	KindAdd = "add"
	// KindDelete: the property goes.
	KindDelete = "delete"
	// KindUpdate: the value changes.
	KindUpdate = "update"
)

// Masks shown in place of values.
const (
	// Secret stands for a value marked secret.
	Secret = "[secret]"
	// Unknown stands for a value the preview cannot know yet (computed
	// during the update).
	Unknown = "[unknown]"
)

// Diff is the value diff of one preview.
type Diff struct {
	// Resources are the resources the preview would change, at most
	// MaxResources, in the engine's order.
	Resources []Resource `json:"resources"`
	// Truncated says that more resources changed than are kept.
	Truncated bool `json:"truncated,omitempty"`
	// ValuesDropped says that values were left out to keep the diff under
	// MaxEncoded: paths and kinds are kept.
	ValuesDropped bool `json:"valuesDropped,omitempty"`
}

// Resource is the value diff of one resource step.
type Resource struct {
	// URN is the resource's URN.
	URN string `json:"urn"`
	// Type is its type token.
	Type string `json:"type,omitempty"`
	// Op is the step: create, update, replace, delete, ...
	Op string `json:"op"`
	// Properties are the changed properties, leaf by leaf, at most
	// MaxProperties.
	Properties []Property `json:"properties,omitempty"`
	// Truncated says that more properties changed than are kept.
	Truncated bool `json:"truncated,omitempty"`
}

// Property is one changed value.
type Property struct {
	// Path is the property's path: top-level name, then ".name" for an
	// object's key (`["key"]` when it is not an identifier) and "[i]" for
	// an array's element, as Pulumi writes property paths.
	Path string `json:"path"`
	// Kind is add, delete or update.
	Kind string `json:"kind"`
	// Old is the value before, rendered as JSON (unset for an add).
	Old string `json:"old,omitempty"`
	// New is the value after, rendered as JSON (unset for a delete).
	New string `json:"new,omitempty"`
	// Replaces says that the change forces the resource's replacement.
	Replaces bool `json:"replaces,omitempty"`
}

// Signatures of the special objects of Pulumi's serialized property values.
const (
	sigKey         = "4dabf18193072939515e22adb298388d"
	secretSig      = "1b47061264138c4ac30d75fd1eb44270"
	assetSig       = "c44067f5952c0a294b673a41bacd8c17"
	archiveSig     = "0def7320c3a5731c473e5ecbe6d01bc7"
	resourceRefSig = "5cf8f73096256a8f31e491e813e4eb8e"
	// computed is the placeholder of a value the preview cannot know.
	computed = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
)

// FromStep builds the value diff of one resource step from the metadata
// of a resourcePreEvent, as JSON decodes it (the engine's
// StepEventMetadata: op, urn, type, old and new with their inputs, diffs
// and detailedDiff). It reads inputs only: what the program and its
// configuration set, which is what an approver decides on.
func FromStep(md map[string]any) Resource {
	r := Resource{URN: str(md["urn"]), Type: str(md["type"]), Op: str(md["op"])}
	oldIn, newIn := inputs(md["old"]), inputs(md["new"])
	detailed := detailedDiff(md["detailedDiff"])
	var props []Property
	switch r.Op {
	case "create", "create-replacement", "import":
		walk(&props, "", nil, newIn, false, true)
	case "delete", "delete-replaced", "discard":
		walk(&props, "", oldIn, nil, true, false)
	default:
		keys := changedKeys(md, detailed)
		if len(keys) == 0 {
			keys = unionKeys(oldIn, newIn)
		}
		for _, k := range keys {
			o, hasOld := oldIn[k]
			n, hasNew := newIn[k]
			walk(&props, PathJoin("", k), o, n, hasOld, hasNew)
		}
		// What the engine says changed but the values cannot show (a
		// secret on both sides looks the same blinded).
		for _, path := range engineChanged(md, detailed) {
			if !covered(props, path) {
				o, hasOld := lookup(oldIn, path)
				n, hasNew := lookup(newIn, path)
				props = append(props, leaf(path, o, n, hasOld, hasNew))
			}
		}
	}
	for i := range props {
		props[i].Replaces = replaces(props[i].Path, detailed, stringList(md["keys"]), r.Op)
	}
	if len(props) > MaxProperties {
		props, r.Truncated = props[:MaxProperties], true
	}
	r.Properties = props
	return r
}

// Add appends r to d, keeping at most MaxResources. Steps that change
// nothing ("same", reads, refreshes) and the halves of a replacement are
// left out.
func (d *Diff) Add(r Resource) {
	switch r.Op {
	case "", "same", "read", "refresh", "read-replacement", "remove-pending-replace", "discard",
		"create-replacement", "delete-replaced", "import-replacement":
		// Nothing changes, or half of a replacement whose replace step
		// says it all.
		return
	}
	if len(d.Resources) >= MaxResources {
		d.Truncated = true
		return
	}
	d.Resources = append(d.Resources, r)
}

// Encode renders d as JSON, dropping values (last resource first) while it
// is larger than MaxEncoded.
func Encode(d Diff) ([]byte, error) {
	b, err := json.Marshal(d)
	for i := len(d.Resources) - 1; err == nil && len(b) > MaxEncoded && i >= 0; i-- {
		for j := range d.Resources[i].Properties {
			p := &d.Resources[i].Properties[j]
			p.Old, p.New = "", ""
		}
		d.ValuesDropped = true
		b, err = json.Marshal(d)
	}
	return b, err
}

// Decode reads what Encode wrote.
func Decode(b []byte) (Diff, error) {
	var d Diff
	if err := json.Unmarshal(b, &d); err != nil {
		return Diff{}, fmt.Errorf("reading the value diff: %w", err)
	}
	return d, nil
}

// ForURN returns the resource of d with the URN and op, if d has it.
func (d Diff) ForURN(urn, op string) (Resource, bool) {
	for _, r := range d.Resources {
		if r.URN == urn && (op == "" || r.Op == op) {
			return r, true
		}
	}
	return Resource{}, false
}

// walk appends to props the leaves where o and n differ, under path. A
// secret, an unknown value, an asset or a reference is a leaf; so is
// anything whose kind differs on the two sides.
func walk(props *[]Property, path string, o, n any, hasOld, hasNew bool) {
	if len(*props) > MaxProperties {
		return
	}
	om, oIsMap := plainObject(o)
	nm, nIsMap := plainObject(n)
	switch {
	case hasOld && hasNew && oIsMap && nIsMap, !hasOld && nIsMap && len(nm) > 0, !hasNew && oIsMap && len(om) > 0:
		for _, k := range unionKeys(om, nm) {
			ov, ho := om[k]
			nv, hn := nm[k]
			walk(props, PathJoin(path, k), ov, nv, ho, hn)
		}
		return
	}
	oa, oIsArr := o.([]any)
	na, nIsArr := n.([]any)
	switch {
	case hasOld && hasNew && oIsArr && nIsArr, !hasOld && nIsArr && len(na) > 0, !hasNew && oIsArr && len(oa) > 0:
		for i := range max(len(oa), len(na)) {
			var ov, nv any
			if i < len(oa) {
				ov = oa[i]
			}
			if i < len(na) {
				nv = na[i]
			}
			walk(props, path+"["+strconv.Itoa(i)+"]", ov, nv, i < len(oa), i < len(na))
		}
		return
	}
	if hasOld && hasNew && equal(o, n) {
		return
	}
	if !hasOld && !hasNew {
		return
	}
	*props = append(*props, leaf(path, o, n, hasOld, hasNew))
}

// leaf is the change of one value.
func leaf(path string, o, n any, hasOld, hasNew bool) Property {
	p := Property{Path: path, Kind: KindUpdate}
	switch {
	case !hasOld:
		p.Kind = KindAdd
	case !hasNew:
		p.Kind = KindDelete
	}
	if hasOld {
		p.Old = Render(o)
	}
	if hasNew {
		p.New = Render(n)
	}
	return p
}

// Render renders a serialized property value as JSON, with secrets,
// unknowns, assets, archives and resource references masked, cut at
// MaxValue bytes.
func Render(v any) string {
	b, err := json.Marshal(mask(v))
	if err != nil {
		return "[unrenderable]"
	}
	s := string(b)
	if len(s) > MaxValue {
		cut := MaxValue
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
	}
	return s
}

// mask replaces the special values in v by their masks, recursively.
func mask(v any) any {
	switch t := v.(type) {
	case string:
		if t == computed {
			return Unknown
		}
		return t
	case map[string]any:
		switch t[sigKey] {
		case secretSig:
			return Secret
		case assetSig:
			return describeAsset("asset", t)
		case archiveSig:
			return describeAsset("archive", t)
		case resourceRefSig:
			return "[resource " + str(t["urn"]) + "]"
		case nil:
		default:
			return "[" + str(t[sigKey]) + "]"
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = mask(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = mask(e)
		}
		return out
	default:
		return v
	}
}

// describeAsset names an asset or archive by its hash (its text or
// contents are not shown).
func describeAsset(what string, m map[string]any) string {
	if h := str(m["hash"]); h != "" {
		return "[" + what + " sha256:" + h + "]"
	}
	for _, k := range []string{"path", "uri"} {
		if s := str(m[k]); s != "" {
			return "[" + what + " " + s + "]"
		}
	}
	return "[" + what + "]"
}

// equal compares two serialized values by their masked rendering: two
// secrets look equal, and FromStep adds the ones the engine says changed.
func equal(a, b any) bool {
	ab, err1 := json.Marshal(mask(a))
	bb, err2 := json.Marshal(mask(b))
	return err1 == nil && err2 == nil && string(ab) == string(bb)
}

// plainObject returns v as an object when it is one and not a special
// value (secret, asset, ...).
func plainObject(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	if _, special := m[sigKey]; special {
		return nil, false
	}
	return m, true
}

// inputs returns the inputs of a step's old or new state.
func inputs(state any) map[string]any {
	m, _ := state.(map[string]any)
	in, _ := m["inputs"].(map[string]any)
	return in
}

// detailedDiff returns the engine's detailed diff: property path → kind
// ("diffKind" in the event's JSON).
func detailedDiff(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for path, d := range m {
		dm, _ := d.(map[string]any)
		out[path] = cmp.Or(str(dm["diffKind"]), str(dm["kind"]))
	}
	return out
}

// changedKeys are the top-level properties the engine says changed: its
// diffs, and the first element of every detailed diff path, sorted.
func changedKeys(md map[string]any, detailed map[string]string) []string {
	keys := stringList(md["diffs"])
	for path := range detailed {
		if k := topLevel(path); k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// engineChanged are the paths the engine says changed, sorted: the detailed
// diff's, or else the top-level diffs.
func engineChanged(md map[string]any, detailed map[string]string) []string {
	var paths []string
	for path := range detailed {
		paths = append(paths, path)
	}
	if len(paths) == 0 {
		for _, k := range stringList(md["diffs"]) {
			paths = append(paths, PathJoin("", k))
		}
	}
	slices.Sort(paths)
	return paths
}

// covered reports whether props has an entry at path, under it, or above
// it.
func covered(props []Property, path string) bool {
	return slices.ContainsFunc(props, func(p Property) bool { return within(p.Path, path) || within(path, p.Path) })
}

// within reports whether path is prefix or a property under it.
func within(path, prefix string) bool {
	if path == prefix {
		return true
	}
	return strings.HasPrefix(path, prefix) && (path[len(prefix)] == '.' || path[len(prefix)] == '[')
}

// replaces reports whether a change at path forces the replacement: a
// detailed diff of a replacing kind at, above or under it; without a
// detailed diff, the step replaces and the engine names the path's
// top-level property among its replace keys.
func replaces(path string, detailed map[string]string, keys []string, op string) bool {
	if len(detailed) > 0 {
		for p, kind := range detailed {
			if strings.HasSuffix(kind, "-replace") && (within(path, p) || within(p, path)) {
				return true
			}
		}
		return false
	}
	return (op == "replace" || op == "create-replacement") && slices.Contains(keys, topLevel(path))
}

// identifier matches a key that a path writes after a dot.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// PathJoin appends the object key k to path: ".k" after a path, k alone
// at the top, `["k"]` when k is not an identifier, as Pulumi writes
// property paths. The spec diff of a held change (internal/change) writes
// its paths the same way.
func PathJoin(path, k string) string {
	switch {
	case identifier.MatchString(k) && path == "":
		return k
	case identifier.MatchString(k):
		return path + "." + k
	default:
		return path + "[" + strconv.Quote(k) + "]"
	}
}

// topLevel is the top-level property of a path ("tags" of "tags.env",
// "a.b" of `["a.b"].c`).
func topLevel(path string) string {
	segs := splitPath(path)
	if len(segs) == 0 {
		return ""
	}
	return segs[0]
}

// splitPath splits a property path into its keys and indices (indices as
// their decimal text).
func splitPath(path string) []string {
	var segs []string
	for i := 0; i < len(path); {
		switch path[i] {
		case '.':
			i++
		case '[':
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				return append(segs, path[i:])
			}
			inner := path[i+1 : i+end]
			if strings.HasPrefix(inner, `"`) {
				// A quoted key may hold ']': find the closing quote.
				if q, err := strconv.QuotedPrefix(path[i+1:]); err == nil {
					unq, _ := strconv.Unquote(q)
					segs = append(segs, unq)
					i += 1 + len(q) + 1
					continue
				}
			}
			segs = append(segs, inner)
			i += end + 1
		default:
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' {
				j++
			}
			segs = append(segs, path[i:j])
			i = j
		}
	}
	return segs
}

// lookup finds the value at path in m.
func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, seg := range splitPath(path) {
		switch t := cur.(type) {
		case map[string]any:
			if t[sigKey] != nil {
				// Inside a secret: the secret stands for the whole.
				return t, true
			}
			v, ok := t[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			cur = t[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// unionKeys are the keys of a and b, sorted.
func unionKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// stringList reads a JSON array of strings.
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s := str(e); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// str reads a JSON string.
func str(v any) string {
	s, _ := v.(string)
	return s
}
