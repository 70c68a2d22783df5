package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestOperatorRefusesMalformedPod: a --pod that is not namespace/name stops
// the operator before it connects anywhere, naming the flag, rather than
// leaving the artifacts Service without a leader to reach.
func TestOperatorRefusesMalformedPod(t *testing.T) {
	for _, pod := range []string{"stackyard-7d9f", "/stackyard-7d9f", "stackyard-system/"} {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"operator", "--pod=" + pod})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "--pod=") || !strings.Contains(err.Error(), "namespace/name") {
			t.Errorf("--pod=%s: %v, want an error naming the flag and the form namespace/name", pod, err)
		}
	}
}

// TestOwnPod: --pod defaults to the downward API's variables, and to
// nothing outside a Pod.
func TestOwnPod(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "stackyard-system")
	t.Setenv("POD_NAME", "stackyard-7d9f-x2")
	if got := ownPod(); got != "stackyard-system/stackyard-7d9f-x2" {
		t.Errorf("ownPod() = %q", got)
	}
	t.Setenv("POD_NAME", "")
	if got := ownPod(); got != "" {
		t.Errorf("without POD_NAME, ownPod() = %q, want empty", got)
	}
}
