package server

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// resolveConfigItem reads an item's value from its source and validates its
// key. Secret values are remembered for redaction before anything else can
// fail, and never appear in the errors it returns.
func (s *Server) resolveConfigItem(item *agentpb.ConfigItem, project string) (configEntry, error) {
	e := configEntry{key: strings.TrimSpace(item.GetKey()), path: item.GetPath(), secret: item.GetSecret()}
	if e.key == "" {
		return e, agenterr.New(agenterr.InvalidConfig, "config item without a key")
	}
	if !strings.Contains(topSegment(e.key, e.path), ":") {
		e.key = project + ":" + e.key
	}

	var err error
	switch v := item.GetV().(type) {
	case *agentpb.ConfigItem_Literal:
		e.value = v.Literal
	case *agentpb.ConfigItem_Value:
		err = e.setStructured(v.Value)
	case *agentpb.ConfigItem_ValueFrom:
		err = e.readFrom(v.ValueFrom)
	default:
		err = fmt.Errorf("no value given")
	}
	if e.secret {
		if e.object {
			s.secrets.AddJSON(e.value)
		} else {
			s.secrets.Add(e.value)
		}
	}
	if err != nil {
		return e, agenterr.New(agenterr.InvalidConfig, "config key %q: %s", item.GetKey(), s.secrets.Redact(err.Error())).
			With("key", item.GetKey())
	}
	if _, _, err := configKey(e.key, e.path); err != nil {
		return e, badKey(item.GetKey(), err)
	}
	return e, nil
}

// setStructured stores v: objects and lists as JSON, numbers and booleans
// as typed text (a secret one as plain text: secrets are strings).
func (e *configEntry) setStructured(v *structpb.Value) error {
	defer func() {
		if e.secret {
			e.typ = config.TypeUnknown
		}
	}()
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		e.value = k.StringValue
	case *structpb.Value_BoolValue:
		e.value, e.typ = strconv.FormatBool(k.BoolValue), config.TypeBool
	case *structpb.Value_NumberValue:
		n := k.NumberValue
		e.value, e.typ = strconv.FormatFloat(n, 'f', -1, 64), config.TypeFloat
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			e.typ = config.TypeInt
		}
	case *structpb.Value_StructValue, *structpb.Value_ListValue:
		b, err := v.MarshalJSON()
		if err != nil {
			return err
		}
		e.value, e.object = string(b), true
	default:
		return fmt.Errorf("null is not a config value")
	}
	return nil
}

// readFrom reads the value from an environment variable or a file of the
// agent, parsing it as JSON when asked.
func (e *configEntry) readFrom(from *agentpb.ConfigValueFrom) error {
	var raw string
	switch src := from.GetSource().(type) {
	case *agentpb.ConfigValueFrom_Env:
		v, ok := os.LookupEnv(src.Env)
		if !ok {
			return fmt.Errorf("environment variable %s is not set", src.Env)
		}
		raw = v
	case *agentpb.ConfigValueFrom_Path:
		b, err := os.ReadFile(src.Path)
		if err != nil {
			return fmt.Errorf("read %s: %w", src.Path, unwrapPathError(err))
		}
		raw = string(b)
	default:
		return fmt.Errorf("value_from names neither env nor path")
	}
	if !from.GetJson() {
		e.value = raw
		return nil
	}
	var v structpb.Value
	if err := v.UnmarshalJSON([]byte(raw)); err != nil {
		// The decoder's message may quote the input, which may be secret.
		return fmt.Errorf("value is not valid JSON")
	}
	return e.setStructured(&v)
}

// topSegment is the part of key that names the config key: all of it, or
// with path set what comes before the first "." or "[", as the CLI reads
// it (a ":" further along a path belongs to a sub-key's name).
func topSegment(key string, path bool) string {
	if i := strings.IndexAny(key, ".["); path && i > 0 {
		return key[:i]
	}
	return key
}

// configKey parses a key the way the CLI does: "namespace:name", where
// with path set the name is a property path whose first element is the
// key's name. It returns the key and the path (a one-element path when
// path is not set).
func configKey(key string, path bool) (config.Key, resource.PropertyPath, error) {
	top := topSegment(key, path)
	k, err := config.ParseKey(top)
	if err != nil {
		return config.Key{}, nil, err
	}
	if !path {
		return k, resource.PropertyPath{k.Name()}, nil
	}
	// The rest of a path belongs to the key's name, ":" and all.
	k = config.MustMakeKey(k.Namespace(), k.Name()+key[len(top):])
	p, err := resource.ParsePropertyPathStrict(k.Name())
	if err != nil {
		return config.Key{}, nil, err
	}
	if len(p) == 0 {
		return config.Key{}, nil, fmt.Errorf("empty path")
	}
	if first, ok := p[0].(string); !ok || first == "" {
		return config.Key{}, nil, fmt.Errorf("a config path must start with a key name")
	}
	return k, p, nil
}

// skeletonOf returns a JSON document with the shape of doc and every leaf
// replaced by an empty string.
func skeletonOf(doc string) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return "", err
	}
	var blank func(any) any
	blank = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, c := range t {
				t[k] = blank(c)
			}
			return t
		case []any:
			for i, c := range t {
				t[i] = blank(c)
			}
			return t
		default:
			return ""
		}
	}
	b, err := json.Marshal(blank(v))
	return string(b), err
}

// secretLeaves splits a secret structured value into one path entry per
// leaf ("ns:key.a[0]" = "x"), for the CLI to encrypt in place. Null leaves
// are left out; other scalars are stored as their JSON text.
func secretLeaves(e configEntry) ([]configEntry, error) {
	k, root, err := configKey(e.key, e.path)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal([]byte(e.value), &v); err != nil {
		return nil, err
	}
	var out []configEntry
	var walk func(p resource.PropertyPath, v any)
	walk = func(p resource.PropertyPath, v any) {
		switch t := v.(type) {
		case map[string]any:
			for name, c := range t {
				walk(append(p[:len(p):len(p)], name), c)
			}
		case []any:
			for i, c := range t {
				walk(append(p[:len(p):len(p)], i), c)
			}
		case nil:
		default:
			text, ok := t.(string)
			if !ok {
				b, _ := json.Marshal(t)
				text = string(b)
			}
			out = append(out, configEntry{key: k.Namespace() + ":" + p.String(), path: true, secret: true, value: text})
		}
	}
	walk(root, v)
	// A path cannot spell every map key (an empty one, for instance).
	for _, l := range out {
		if _, _, err := configKey(l.key, true); err != nil {
			return nil, fmt.Errorf("a secret structured value with this shape cannot be stored: %w", err)
		}
	}
	return out, nil
}

// unwrapPathError drops the path from an *os.PathError, which the caller
// already names.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
