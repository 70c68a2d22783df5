package stackrun

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// FuzzBuildWorkspace feeds Stack specs, as a user writes them, to
// BuildWorkspace: whatever the spec, it returns a Workspace for the Stack or
// a stall whose message names the spec field at fault, and never panics.
// Specs the API server's schema would refuse are fed too: a controller must
// not crash on an object stored before a schema tightened.
func FuzzBuildWorkspace(f *testing.F) {
	for _, seed := range []string{
		`{"stack":"dev","backend":"file:///tmp","config":{"a:b":"x","a:n":{"k":[1,2]}}}`,
		`{"stack":"org/p/dev","envRefs":{"X":{"type":"Literal","literal":{"value":"v"}},"Y":{"type":"Secret","secret":{"name":"s","key":"k"}}}}`,
		`{"stack":"dev","secretsRef":{"p:pw":{"type":"Secret","secret":{"name":"s","key":"k","namespace":"other"}}}}`,
		`{"stack":"dev","secretsRef":{"p:pw":{"type":"Literal"}},"envRefs":{"Z":{"type":"Secret"}}}`,
		`{"stack":"dev","configRef":{"p:c":{"name":"cm","key":"k","json":true}},"envSecrets":["s"],"accessTokenSecret":"t"}`,
		`{"stack":"dev","workspaceTemplate":{"metadata":{"labels":{"pulumi.com/stack-name":"other"}},"spec":{"image":"x","env":[{"name":"A","value":"b"}]}}}`,
		`{"stack":"dev","workspaceTemplate":{"spec":{"stacks":[{"name":"dev","config":[{"key":"k","value":"v"}]}]}}}`,
		`{"stack":"dev","secretsProvider":"passphrase","environment":["env1"],"useLocalStackOnly":true}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		stack := &pulumiv1.Stack{}
		stack.Name, stack.Namespace = "web", "apps"
		if err := yaml.Unmarshal([]byte(doc), &stack.Spec); err != nil {
			return
		}
		ws, err := BuildWorkspace(stack, Source{})
		if err != nil {
			var stalling *sreconcile.Stalling
			if !errors.As(err, &stalling) || !strings.Contains(err.Error(), "spec.") {
				t.Fatalf("BuildWorkspace(%s) = %v: want a stall naming a spec field", doc, err)
			}
			return
		}
		if ws.Name != "web" || ws.Namespace != "apps" || ws.Labels[StackNameLabel] != "web" {
			t.Fatalf("BuildWorkspace(%s) named %s/%s with labels %v", doc, ws.Namespace, ws.Name, ws.Labels)
		}
		if !hasStack(ws, stack.Spec.Stack) {
			out, _ := json.Marshal(ws.Spec.Stacks)
			t.Fatalf("BuildWorkspace(%s): no workspace stack named %q in %s", doc, stack.Spec.Stack, out)
		}
	})
}

func hasStack(ws *autov1alpha1.Workspace, name string) bool {
	for _, s := range ws.Spec.Stacks {
		if s.Name == name {
			return true
		}
	}
	return false
}
