package server

import (
	"context"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// configEntry is one resolved ConfigItem.
type configEntry struct {
	key    string // as given, namespaced with the project name if it had none
	path   bool
	secret bool
	value  string // the literal, or the JSON text of a structured value
	object bool   // value is a JSON object or list
	// typ is the type of a plaintext number or boolean, stored typed like
	// `pulumi config set --type`; TypeUnknown for everything else.
	typ config.Type
}

// mode groups entries that are set by the same call. A value that is not
// secret is written into the stack settings file directly (setInFile),
// one write for a run of them, whatever its shape: that is
// what the CLI's set-all would write, without starting the CLI. A secret
// needs the secrets provider, so secrets go through the CLI: strings with
// one set-all each run (which takes one --path flag for all its values),
// and structured secrets as their shape written directly, then their
// leaves through the CLI, which encrypts them.
func (e configEntry) mode() string {
	switch {
	case e.object && e.secret:
		return "secretObject"
	case !e.secret:
		return "file"
	case e.path:
		return "secretPath"
	default:
		return "secret"
	}
}

// SetAllConfig resolves every item (reading env vars and files where asked),
// validates every key and only then writes the values, so that a bad item
// leaves the configuration untouched. Items are applied in order; runs of
// items of the same kind share one CLI call.
//
// Strings are stored as they are. A structured value that is an object or
// a list is stored as structured configuration (a YAML map or list in
// Pulumi.<stack>.yaml). When it is also secret, each of its leaves is
// encrypted in place, as `pulumi config set --path --secret` would do; like
// every Pulumi secret, such a leaf reads back as a string. A scalar
// structured value (number, boolean) is stored typed, as `pulumi config set
// --type` would, so programs see a number or a boolean; a secret one is a
// secret string of its JSON text.
//
// A request that resolves to the configuration this agent last applied to
// the stack, while the stack's settings files are as that left them, is
// not applied again: it would change nothing.
func (s *Server) SetAllConfig(ctx context.Context, req *agentpb.SetAllConfigRequest) (*agentpb.SetAllConfigResult, error) {
	st, err := s.selected()
	if err != nil {
		return nil, err
	}
	if err := s.requireProject(); err != nil {
		return nil, err
	}
	ctx, done, err := s.begin(ctx, "SetAllConfig")
	if err != nil {
		return nil, err
	}
	defer done()

	ws := st.Workspace()
	proj, err := ws.ProjectSettings(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	entries := make([]configEntry, 0, len(req.GetConfig()))
	for _, item := range req.GetConfig() {
		e, err := s.resolveConfigItem(item, string(proj.Name))
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}

	name := st.Name()
	digest := configDigest(name, entries)
	if s.configWarm(name, digest, s.settingsFingerprint(name)) {
		s.log.V(1).Info("configuration unchanged since this agent applied it; not set again", "stack", name, "items", len(entries))
		return &agentpb.SetAllConfigResult{}, nil
	}
	s.rememberConfig(name, "", "")
	for start := 0; start < len(entries); {
		end := start + 1
		for end < len(entries) && entries[end].mode() == entries[start].mode() {
			end++
		}
		if err := s.applyConfig(ctx, st, entries[start:end]); err != nil {
			return nil, err
		}
		start = end
	}
	files := s.settingsFingerprint(name)
	s.rememberConfig(name, digest, files)
	s.settingsWritten(name, files)
	return &agentpb.SetAllConfigResult{}, nil
}

// applyConfig writes a run of entries that share one mode.
func (s *Server) applyConfig(ctx context.Context, st auto.Stack, entries []configEntry) error {
	switch entries[0].mode() {
	case "file":
		return s.setInFile(ctx, st, entries, false)
	case "secretObject":
		if err := s.setInFile(ctx, st, entries, true); err != nil {
			return err
		}
		var leaves []configEntry
		for _, e := range entries {
			l, err := secretLeaves(e)
			if err != nil {
				return badKey(e.key, err)
			}
			leaves = append(leaves, l...)
		}
		if len(leaves) == 0 {
			return nil
		}
		return s.setStrings(ctx, st, leaves, true)
	default:
		return s.setStrings(ctx, st, entries, entries[0].path)
	}
}

// setStrings sets string values with one `pulumi config set-all`. It takes
// a map, so of two items with the same key only the last is kept, as if
// they had been set one after the other.
func (s *Server) setStrings(ctx context.Context, st auto.Stack, entries []configEntry, path bool) error {
	m := auto.ConfigMap{}
	for _, e := range entries {
		m[e.key] = auto.ConfigValue{Value: e.value, Secret: e.secret}
	}
	opts := &auto.ConfigOptions{Path: path}
	if err := st.Workspace().SetAllConfigWithOptions(ctx, st.Name(), m, opts); err != nil {
		return s.fail(ctx, err, nil).With("keys", keysOf(entries))
	}
	return nil
}

// setInFile writes values into the stack settings file directly, where
// the CLI keeps it (stackSettingsPath): strings as plain config, numbers
// and booleans typed, objects and lists as structured configuration (the
// CLI's set-all only takes strings, and costs a process start). With
// skeleton set, only the shape of each value is written, every leaf an
// empty string, so no secret touches the file before the CLI encrypts the
// leaves. A stack whose settings file does not exist yet (a backend whose
// stacks need none) gets one.
func (s *Server) setInFile(ctx context.Context, st auto.Stack, entries []configEntry, skeleton bool) error {
	ps, path, err := s.loadStackSettings(ctx, st.Workspace(), st.Name())
	if err != nil {
		return s.fail(ctx, err, nil)
	}
	if ps.Config == nil {
		ps.Config = config.Map{}
	}
	for _, e := range entries {
		key, _, err := configKey(e.key, e.path)
		if err != nil {
			return badKey(e.key, err)
		}
		var value config.Value
		switch {
		case skeleton:
			text, err := skeletonOf(e.value)
			if err != nil {
				return badKey(e.key, err)
			}
			value = config.NewObjectValue(text)
		case e.object:
			value = config.NewObjectValue(e.value)
		case e.typ != config.TypeUnknown:
			value = config.NewTypedValue(e.value, e.typ)
		default:
			value = config.NewValue(e.value)
		}
		if err := ps.Config.Set(key, value, e.path); err != nil {
			return badKey(e.key, err)
		}
	}
	if err := ps.Save(path); err != nil {
		return s.fail(ctx, err, nil)
	}
	return nil
}

// badKey is the InvalidConfig error for a key the CLI would reject.
func badKey(key string, err error) error {
	return agenterr.New(agenterr.InvalidConfig, "invalid config key %q: %v", key, err).With("key", key)
}

// keysOf lists the keys of entries for error metadata.
func keysOf(entries []configEntry) string {
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.key
	}
	return strings.Join(keys, ",")
}
