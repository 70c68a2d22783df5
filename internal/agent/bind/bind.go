// Package bind is the contract between the local runtime and a pre-started
// agent (`stackyard-agent serve --await-spec`): the Spec that turns a warm
// agent, started before anyone needed it with only the operator's
// inherited environment, into the agent of one Workspace.
//
// The runtime writes the Spec to the agent's stdin and closes it; the
// agent reads it, applies it (working directory, environment), and then
// serves as an agent started with the same flags would. The pipe is the
// only way in: no other process holds it, so nobody else can bind an agent
// to a Workspace, and a bound agent is never bound again.
//
// The Spec carries the Workspace's environment, Secrets' values among
// them. It is never logged, and it does not show in the agent's command
// line or in /proc/<pid>/environ, which hold what the agent started with.
package bind

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MaxSize bounds an encoded Spec: an environment larger than this is an
// error, not an agent that reads without end.
const MaxSize = 8 << 20

// Spec is what a pre-started agent needs to serve one Workspace.
type Spec struct {
	// Dir is the Workspace's state directory, the agent's working
	// directory once bound. Absolute.
	Dir string `json:"dir"`
	// Workspace is the Pulumi project directory served (serve's
	// --workspace). Absolute.
	Workspace string `json:"workspace"`
	// TokenFile holds the bearer token callers must present (serve's
	// --token-file). Absolute.
	TokenFile string `json:"tokenFile"`
	// Verbose makes the agent log more (serve's --verbose).
	Verbose bool `json:"verbose,omitempty"`
	// Env is the agent's whole environment, as KEY=VALUE: it replaces the
	// one the agent started with.
	Env []string `json:"env"`
}

// Write encodes s to w, after checking it as Read will.
func Write(w io.Writer, s Spec) error {
	if err := s.validate(); err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if len(b) > MaxSize {
		return fmt.Errorf("bind: the spec is %d bytes, more than %d (env too large)", len(b), MaxSize)
	}
	_, err = w.Write(b)
	return err
}

// ErrNoSpec says the runtime closed the agent's stdin without writing a
// Spec: it no longer needs the agent, which should exit quietly.
var ErrNoSpec = errors.New("bind: no spec: stdin closed empty")

// Read decodes the Spec r holds up to its end. The errors name the field
// at fault; none of them quotes a value.
func Read(r io.Reader) (Spec, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return Spec{}, fmt.Errorf("bind: reading the spec: %w", err)
	}
	if len(b) == 0 {
		return Spec{}, ErrNoSpec
	}
	if len(b) > MaxSize {
		return Spec{}, fmt.Errorf("bind: the spec is more than %d bytes", MaxSize)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, decodeError(err)
	}
	if dec.More() {
		return Spec{}, errors.New("bind: decoding the spec: data after the spec")
	}
	if err := s.validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// decodeError describes a decoding error without the input it quotes
// (json's syntax errors quote the character at fault, which may belong to
// a secret).
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("bind: the spec is not JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("bind: spec.%s: want %s", typ.Field, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("bind: the spec ends early")
	}
	return fmt.Errorf("bind: decoding the spec: %w", err)
}

// validate checks what Apply and serve rely on.
func (s Spec) validate() error {
	for _, f := range []struct{ name, path string }{{"dir", s.Dir}, {"workspace", s.Workspace}, {"tokenFile", s.TokenFile}} {
		if f.path == "" || !filepath.IsAbs(f.path) || strings.ContainsRune(f.path, 0) {
			return fmt.Errorf("bind: spec.%s must be an absolute path", f.name)
		}
	}
	for i, kv := range s.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("bind: spec.env[%d] is not NAME=VALUE", i)
		}
	}
	return nil
}

// Apply makes s the process's working directory and environment.
func (s Spec) Apply() error {
	if err := os.Chdir(s.Dir); err != nil {
		return fmt.Errorf("bind: spec.dir: %w", err)
	}
	os.Clearenv()
	for i, kv := range s.Env {
		name, value, _ := strings.Cut(kv, "=")
		if err := os.Setenv(name, value); err != nil {
			return fmt.Errorf("bind: spec.env[%d]: %w", i, err)
		}
	}
	return nil
}
