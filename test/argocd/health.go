// Package argocd runs stackyard's Argo CD health check (config/argocd/
// health.lua) the way Argo CD does: the object, as JSON, becomes the Lua
// global `obj`, and the script returns a table with status and message.
// Controller tests use it to check that the objects they produce read as
// Healthy, Progressing or Degraded to Argo CD.
package argocd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	lua "github.com/yuin/gopher-lua"

	"github.com/stackyard/stackyard/test/testenv"
)

// Health is what Argo CD shows for a resource.
type Health struct {
	// Status is Healthy, Progressing, Degraded, Suspended, Missing or Unknown.
	Status string
	// Message explains the status.
	Message string
}

// ScriptPath is the health check shipped for pulumi.com/Stack.
func ScriptPath() string {
	return filepath.Join(testenv.RepoRoot(), "config", "argocd", "health.lua")
}

// StackHealth evaluates the shipped health check on obj, which may be any
// value that marshals to a Stack's JSON (a typed Stack or unstructured map).
func StackHealth(obj any) (Health, error) {
	script, err := os.ReadFile(ScriptPath())
	if err != nil {
		return Health{}, err
	}
	return Evaluate(string(script), obj)
}

// Evaluate runs a health check script on obj.
func Evaluate(script string, obj any) (Health, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return Health{}, err
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return Health{}, err
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, generic))
	if err := L.DoString(script); err != nil {
		return Health{}, fmt.Errorf("running the health check: %w", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the health check returned %s, not a table", L.Get(-1).Type())
	}
	return Health{
		Status:  lua.LVAsString(ret.RawGetString("status")),
		Message: lua.LVAsString(ret.RawGetString("message")),
	}, nil
}

// toLua converts decoded JSON into Lua values: objects become tables keyed
// by string, arrays 1-based sequences, numbers LNumber.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := L.NewTable()
		for _, item := range v {
			t.Append(toLua(L, item))
		}
		return t
	case map[string]any:
		t := L.NewTable()
		for key, item := range v {
			t.RawSetString(key, toLua(L, item))
		}
		return t
	default:
		return lua.LString(fmt.Sprint(v))
	}
}
