package argocd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/test/testenv"
)

// stack builds an unstructured Stack with the given generation, status and
// metadata additions.
func stack(generation int64, meta map[string]any, status map[string]any) map[string]any {
	metadata := map[string]any{"name": "s", "namespace": "default", "generation": generation}
	for k, v := range meta {
		metadata[k] = v
	}
	obj := map[string]any{"apiVersion": "pulumi.com/v1", "kind": "Stack", "metadata": metadata, "spec": map[string]any{"stack": "dev"}}
	if status != nil {
		obj["status"] = status
	}
	return obj
}

func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

func TestStackHealth(t *testing.T) {
	ready := []any{cond("Ready", "True", "ProcessingCompleted", "the stack has been processed and is up to date")}
	tests := []struct {
		name        string
		obj         map[string]any
		wantStatus  string
		wantMessage string
	}{{
		name:       "never reconciled",
		obj:        stack(1, nil, nil),
		wantStatus: "Progressing",
	}, {
		name:        "ready",
		obj:         stack(2, nil, map[string]any{"observedGeneration": 2, "conditions": ready}),
		wantStatus:  "Healthy",
		wantMessage: "up to date",
	}, {
		name: "reconciling, conditions in any order",
		obj: stack(2, nil, map[string]any{"observedGeneration": 2, "conditions": []any{
			cond("Ready", "False", "NotReadyInProgress", "reconciliation is in progress"),
			cond("Reconciling", "True", "StackProcessing", "stack is being processed"),
		}}),
		wantStatus:  "Progressing",
		wantMessage: "stack is being processed",
	}, {
		name: "stalled wins over everything",
		obj: stack(3, nil, map[string]any{"observedGeneration": 3, "conditions": []any{
			cond("Ready", "False", "NotReadyStalled", "reconciliation is stalled"),
			cond("Stalled", "True", "UpdateFailed", "3 updates failed in a row"),
		}}),
		wantStatus:  "Degraded",
		wantMessage: "3 updates failed",
	}, {
		name:        "spec change not yet observed",
		obj:         stack(4, nil, map[string]any{"observedGeneration": 3, "conditions": ready}),
		wantStatus:  "Progressing",
		wantMessage: "generation 4",
	}, {
		name: "reconcile request not yet handled",
		obj: stack(2, map[string]any{"annotations": map[string]any{"pulumi.com/reconciliation-request": "before-first-update"}},
			map[string]any{"observedGeneration": 2, "conditions": ready}),
		wantStatus:  "Progressing",
		wantMessage: "before-first-update",
	}, {
		name: "reconcile request handled",
		obj: stack(2, map[string]any{"annotations": map[string]any{"pulumi.com/reconciliation-request": "r1"}},
			map[string]any{"observedGeneration": 2, "observedReconcileRequest": "r1", "conditions": ready}),
		wantStatus: "Healthy",
	}, {
		name: "terminating with finalizers",
		obj: stack(2, map[string]any{"deletionTimestamp": "2026-11-22T10:00:00Z", "finalizers": []any{"finalizer.stack.pulumi.com"}},
			map[string]any{"observedGeneration": 2, "conditions": ready}),
		wantStatus:  "Progressing",
		wantMessage: "being deleted",
	}, {
		name: "a change held for a promotion",
		obj: stack(5, nil, map[string]any{"observedGeneration": 4, "heldSpec": map[string]any{"digest": "sha256:1", "generation": 5},
			"conditions": []any{
				cond("Ready", "False", "NotReadyInProgress", "reconciliation is in progress"),
				cond("Reconciling", "True", "ChangeHeld", "spec: Stack s is governed by stage prod ..."),
				cond("ChangePending", "True", "ChangeHeld", "spec: Stack s is governed by stage prod, and its spec (generation 5) waits"),
			}}),
		wantStatus:  "Suspended",
		wantMessage: "its spec (generation 5) waits",
	}, {
		name: "a held change edited again, not yet seen",
		obj: stack(6, nil, map[string]any{"observedGeneration": 4, "heldSpec": map[string]any{"digest": "sha256:1", "generation": 5},
			"conditions": []any{cond("ChangePending", "True", "ChangeHeld", "generation 5 waits")}}),
		wantStatus:  "Progressing",
		wantMessage: "generation 6",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StackHealth(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus || !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("got %+v, want status %s with message containing %q", got, tt.wantStatus, tt.wantMessage)
			}
		})
	}
}

// TestConfigMapPatchEmbedsTheScript keeps the ready-to-apply argocd-cm patch
// identical to the script the tests exercise.
func TestConfigMapPatchEmbedsTheScript(t *testing.T) {
	script, err := os.ReadFile(ScriptPath())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "argocd", "argocd-cm-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &patch); err != nil {
		t.Fatal(err)
	}
	if got := patch.Data["resource.customizations.health.pulumi.com_Stack"]; got != string(script) {
		t.Errorf("config/argocd/argocd-cm-patch.yaml does not embed config/argocd/health.lua exactly; regenerate it with hack/argocd-patch.sh")
	}
}
