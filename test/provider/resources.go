package provider

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// resourceOps is what each resource type does for the lifecycle calls. All
// inputs have passed checkInputs; in a preview some may be unknown.
type resourceOps interface {
	// create makes the resource and returns its ID and outputs. In a
	// preview it changes nothing and returns "" and the outputs it can
	// predict, with the rest unknown.
	create(ctx context.Context, in resource.PropertyMap, preview bool) (string, resource.PropertyMap, error)
	// update applies news to the resource whose state is olds (only changes
	// that do not replace reach it) and returns the new outputs.
	update(ctx context.Context, id string, olds, news resource.PropertyMap, preview bool) (resource.PropertyMap, error)
	// read returns the resource as it is now: its ID ("" if it is gone),
	// outputs and inputs. state and inputs are what the engine last recorded.
	read(ctx context.Context, id string, state, inputs resource.PropertyMap) (string, resource.PropertyMap, resource.PropertyMap, error)
	// delete removes the resource; a resource already gone is not an error.
	delete(ctx context.Context, id string, state resource.PropertyMap) error
}

// resourceTypes maps each token to the implementation of its lifecycle.
var resourceTypes = map[string]resourceOps{
	FileType:   fileResource{},
	RandomType: randomResource{},
	SleepType:  sleepResource{},
	FailType:   failResource{},
}

// ---- File ----

// fileResource keeps a file's content equal to its input; its ID is the path.
type fileResource struct{}

func (fileResource) outputs(in resource.PropertyMap) resource.PropertyMap {
	out := resource.PropertyMap{"path": in["path"], "content": in["content"]}
	content := in["content"]
	if isUnknown(content) {
		out["sha256"] = resource.MakeComputed(resource.NewStringProperty(""))
	} else {
		out["sha256"] = like(content, resource.NewStringProperty(sha256Hex(plain(content).StringValue())))
	}
	return out
}

func (r fileResource) create(_ context.Context, in resource.PropertyMap, preview bool) (string, resource.PropertyMap, error) {
	if preview {
		return "", r.outputs(in), nil
	}
	path := stringOf(in, "path")
	if err := writeFile(path, stringOf(in, "content")); err != nil {
		return "", nil, err
	}
	return path, r.outputs(in), nil
}

func (r fileResource) update(_ context.Context, id string, _, news resource.PropertyMap, preview bool) (resource.PropertyMap, error) {
	if !preview {
		if err := writeFile(id, stringOf(news, "content")); err != nil {
			return nil, err
		}
	}
	return r.outputs(news), nil
}

func (r fileResource) read(_ context.Context, id string, state, _ resource.PropertyMap) (string, resource.PropertyMap, resource.PropertyMap, error) {
	data, err := os.ReadFile(id)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("reading %s: %w", id, err)
	}
	ins := resource.PropertyMap{
		"path":    resource.NewStringProperty(id),
		"content": like(state["content"], resource.NewStringProperty(string(data))),
	}
	return id, r.outputs(ins), ins, nil
}

func (fileResource) delete(_ context.Context, id string, _ resource.PropertyMap) error {
	if err := os.Remove(id); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", id, err)
	}
	return nil
}

// writeFile writes content to path, creating missing parent directories.
func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// sha256Hex returns the lower-case hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ---- Random ----

// randomResource makes its strings once, on Create. Every input replaces,
// so Update never has new strings to make.
type randomResource struct{}

func (randomResource) create(_ context.Context, in resource.PropertyMap, preview bool) (string, resource.PropertyMap, error) {
	out := in.Copy()
	if preview {
		out["result"] = resource.MakeComputed(resource.NewStringProperty(""))
		out["secretResult"] = resource.MakeSecret(resource.MakeComputed(resource.NewStringProperty("")))
		return "", out, nil
	}
	n := int(plain(in["length"]).NumberValue())
	result, err := randomString(n)
	if err != nil {
		return "", nil, err
	}
	secret, err := randomString(n)
	if err != nil {
		return "", nil, err
	}
	id, err := newID()
	if err != nil {
		return "", nil, err
	}
	out["result"] = resource.NewStringProperty(result)
	out["secretResult"] = resource.MakeSecret(resource.NewStringProperty(secret))
	return id, out, nil
}

func (randomResource) update(_ context.Context, _ string, olds, news resource.PropertyMap, _ bool) (resource.PropertyMap, error) {
	out := news.Copy()
	out["result"] = olds["result"]
	out["secretResult"] = olds["secretResult"]
	return out, nil
}

func (randomResource) read(_ context.Context, id string, state, inputs resource.PropertyMap) (string, resource.PropertyMap, resource.PropertyMap, error) {
	return readRecorded(RandomType, id, state, inputs)
}

func (randomResource) delete(context.Context, string, resource.PropertyMap) error { return nil }

// randomAlphabet is the set of characters Random draws from.
const randomAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomString returns n characters drawn uniformly from randomAlphabet.
func randomString(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, 64)
	// Bytes at or above this bound are dropped so every character is
	// equally likely (256 is not a multiple of the alphabet's size).
	bound := byte(256 / len(randomAlphabet) * len(randomAlphabet))
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("reading random bytes: %w", err)
		}
		for _, b := range buf {
			if b < bound && len(out) < n {
				out = append(out, randomAlphabet[int(b)%len(randomAlphabet)])
			}
		}
	}
	return string(out), nil
}

// newID returns a fresh random resource ID for resources with no natural one.
func newID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ---- Sleep ----

// sleepResource waits on Create and Update; its only state is its input.
type sleepResource struct{}

func (sleepResource) create(ctx context.Context, in resource.PropertyMap, preview bool) (string, resource.PropertyMap, error) {
	if preview {
		return "", in.Copy(), nil
	}
	if err := sleep(ctx, plain(in["seconds"]).NumberValue()); err != nil {
		return "", nil, err
	}
	id, err := newID()
	if err != nil {
		return "", nil, err
	}
	return id, in.Copy(), nil
}

func (sleepResource) update(ctx context.Context, _ string, _, news resource.PropertyMap, preview bool) (resource.PropertyMap, error) {
	if !preview {
		if err := sleep(ctx, plain(news["seconds"]).NumberValue()); err != nil {
			return nil, err
		}
	}
	return news.Copy(), nil
}

func (sleepResource) read(_ context.Context, id string, state, inputs resource.PropertyMap) (string, resource.PropertyMap, resource.PropertyMap, error) {
	return readRecorded(SleepType, id, state, inputs)
}

func (sleepResource) delete(context.Context, string, resource.PropertyMap) error { return nil }

// sleep waits for seconds, or returns an error as soon as ctx is done (the
// engine cancelled the operation or went away, or the resource's custom
// timeout passed) unless the provider is stubborn (StubbornEnv).
func sleep(ctx context.Context, seconds float64) error {
	d := time.Duration(seconds * float64(time.Second))
	ctx = sleepContext(ctx)
	start := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("sleep of %v timed out after %v (the resource's customTimeouts)", d, time.Since(start).Round(time.Millisecond))
		}
		return fmt.Errorf("sleep of %v cancelled after %v", d, time.Since(start).Round(time.Millisecond))
	}
}

// ---- Fail ----

// failResource fails Create and Update when its fail input is true.
type failResource struct{}

func (failResource) create(_ context.Context, in resource.PropertyMap, preview bool) (string, resource.PropertyMap, error) {
	if err := failIfAsked(in, preview); err != nil {
		return "", nil, err
	}
	if preview {
		return "", in.Copy(), nil
	}
	id, err := newID()
	if err != nil {
		return "", nil, err
	}
	return id, in.Copy(), nil
}

func (failResource) update(_ context.Context, _ string, _, news resource.PropertyMap, preview bool) (resource.PropertyMap, error) {
	if err := failIfAsked(news, preview); err != nil {
		return nil, err
	}
	return news.Copy(), nil
}

func (failResource) read(_ context.Context, id string, state, inputs resource.PropertyMap) (string, resource.PropertyMap, resource.PropertyMap, error) {
	return readRecorded(FailType, id, state, inputs)
}

func (failResource) delete(context.Context, string, resource.PropertyMap) error { return nil }

// failIfAsked returns the message as an error when fail is true. A preview
// never fails: it only predicts, and the failure is for the update itself.
func failIfAsked(in resource.PropertyMap, preview bool) error {
	if preview {
		return nil
	}
	if v := plain(in["fail"]); v.IsBool() && v.BoolValue() {
		return errors.New(stringOf(in, "message"))
	}
	return nil
}

// ---- shared helpers ----

// readRecorded serves Read for resources that exist only in the state: they
// are as recorded. With no recorded state (an import) there is nothing to
// read, since such a resource cannot be found from its ID alone.
func readRecorded(token, id string, state, inputs resource.PropertyMap) (string, resource.PropertyMap, resource.PropertyMap, error) {
	if len(state) == 0 {
		return "", nil, nil, fmt.Errorf("%s cannot be imported: it has no existence outside the stack's state", token)
	}
	if len(inputs) == 0 {
		inputs = resource.PropertyMap{}
		for _, spec := range inputSpecs[token] {
			if v, ok := state[resource.PropertyKey(spec.name)]; ok {
				inputs[resource.PropertyKey(spec.name)] = v
			}
		}
	}
	return id, state, inputs, nil
}

// stringOf returns the string value of m[key], or "" if it is absent.
func stringOf(m resource.PropertyMap, key resource.PropertyKey) string {
	if v := plain(m[key]); v.IsString() {
		return v.StringValue()
	}
	return ""
}

// like returns v marked secret when model is secret, so values derived from
// a secret (a file's hash, content read back) stay secret.
func like(model, v resource.PropertyValue) resource.PropertyValue {
	if model.ContainsSecrets() {
		return resource.MakeSecret(v)
	}
	return v
}
