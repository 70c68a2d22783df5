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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
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
	// one the agent started with. Values are bytes, not text: a Secret's
	// may be any (see wire).
	Env []string `json:"env"`
}

// wire is Spec as encoded. Env goes as base64 (json's encoding of []byte)
// because json strings are UTF-8: a value that is not (a binary Secret
// key) would reach a bound agent changed, where a cold-started one gets
// it exactly.
type wire struct {
	Dir       string   `json:"dir"`
	Workspace string   `json:"workspace"`
	TokenFile string   `json:"tokenFile"`
	Verbose   bool     `json:"verbose,omitempty"`
	Env       [][]byte `json:"env"`
}

// Write encodes s to w, after checking it as Read will.
func Write(w io.Writer, s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	enc := wire{Dir: s.Dir, Workspace: s.Workspace, TokenFile: s.TokenFile, Verbose: s.Verbose,
		Env: make([][]byte, len(s.Env))}
	for i, kv := range s.Env {
		enc.Env[i] = []byte(kv)
	}
	b, err := json.Marshal(enc)
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
	var in wire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Spec{}, decodeError(err)
	}
	if dec.More() {
		return Spec{}, errors.New("bind: decoding the spec: data after the spec")
	}
	s := Spec{Dir: in.Dir, Workspace: in.Workspace, TokenFile: in.TokenFile, Verbose: in.Verbose}
	for _, kv := range in.Env {
		s.Env = append(s.Env, string(kv))
	}
	if err := s.Validate(); err != nil {
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
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &b64):
		return errors.New("bind: spec.env: an entry is not base64")
	case errors.As(err, &syntax):
		return fmt.Errorf("bind: the spec is not JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("bind: spec.%s: want %s", typ.Field, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("bind: the spec ends early")
	}
	return fmt.Errorf("bind: decoding the spec: %w", err)
}

// Validate checks what Apply and serve rely on, and what a process's
// environment can hold. Its errors name a variable, never its value.
func (s Spec) Validate() error {
	for _, f := range []struct{ name, path string }{{"dir", s.Dir}, {"workspace", s.Workspace}, {"tokenFile", s.TokenFile}} {
		if f.path == "" || !filepath.IsAbs(f.path) || strings.ContainsRune(f.path, 0) || !utf8.ValidString(f.path) {
			return fmt.Errorf("bind: spec.%s must be an absolute UTF-8 path", f.name)
		}
	}
	for i, kv := range s.Env {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "" || strings.ContainsRune(name, 0) || !utf8.ValidString(name):
			// Without a name, the entry may be all value: only its index.
			return fmt.Errorf("bind: spec.env[%d] is not NAME=VALUE", i)
		case strings.ContainsRune(value, 0):
			return fmt.Errorf("bind: environment variable %s: its value holds a NUL byte, which no process environment can", name)
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
			return fmt.Errorf("bind: environment variable %s (spec.env[%d]): %w", name, i, err)
		}
	}
	return nil
}
