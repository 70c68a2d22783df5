package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// countingClient takes patches without sending them anywhere and keeps the
// last one: the benchmarks measure building the patch, not the API server.
type countingClient struct {
	client.Client
	sent  int
	patch []byte
}

func (c *countingClient) Patch(_ context.Context, _ client.Object, p client.Patch, _ ...client.PatchOption) error {
	return c.take(p)
}

func (c *countingClient) Status() client.SubResourceWriter { return countingStatus{c: c} }

func (c *countingClient) take(p client.Patch) error {
	data, err := p.Data(nil)
	c.sent++
	c.patch = data
	return err
}

// countingStatus is countingClient's status writer; only Patch is used.
type countingStatus struct {
	client.SubResourceWriter
	c *countingClient
}

func (s countingStatus) Patch(_ context.Context, _ client.Object, p client.Patch, _ ...client.SubResourcePatchOption) error {
	return s.c.take(p)
}

// benchStackStatus returns a Stack in the steady state of a busy one: a
// typical spec, and in status the three kstatus conditions, 50 outputs, a
// lastUpdate and a full history.
func benchStackStatus() *pulumiv1.Stack {
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{
		Name: "web", Namespace: "apps", Generation: 7, ResourceVersion: "4242",
		Finalizers:  []string{"finalizer.stack.pulumi.com"},
		Annotations: map[string]string{shared.ReconcileRequestAnnotation: "2026-11-25T14:00:00Z"},
	}}
	// The spec is not patched, but it is part of what is converted: 20
	// config keys, 10 envRefs and 3 secrets, as a platform team writes.
	spec := &stack.Spec
	spec.Stack, spec.Backend = "acme/web/prod", "s3://acme-pulumi-state?region=eu-west-1"
	spec.Config = map[string]apiextensionsv1.JSON{}
	for i := range 20 {
		spec.Config[fmt.Sprintf("web:setting%02d", i)] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`"value-%02d-of-a-typical-length"`, i))}
	}
	spec.EnvRefs = map[string]shared.ResourceRef{}
	for i := range 10 {
		name := fmt.Sprintf("APP_VAR_%02d", i)
		spec.EnvRefs[name] = shared.ResourceRef{SelectorType: shared.ResourceSelectorSecret, ResourceSelector: shared.ResourceSelector{
			SecretRef: &shared.SecretSelector{Name: "app-env", Key: name},
		}}
	}
	spec.Secrets = map[string]string{"web:apiKey": "k", "web:sessionKey": "s", "web:smtpPass": "p"}
	st := &stack.Status
	st.ObservedGeneration = 7
	at := metav1.NewTime(time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC))
	st.Conditions = []metav1.Condition{
		{Type: ReadyCondition, Status: metav1.ConditionTrue, Reason: "ProcessingCompleted", Message: "the stack is up to date", ObservedGeneration: 7, LastTransitionTime: at},
		{Type: ReconcilingCondition, Status: metav1.ConditionFalse, Reason: "ProcessingCompleted", ObservedGeneration: 7, LastTransitionTime: at},
		{Type: StalledCondition, Status: metav1.ConditionFalse, Reason: "NotStalled", ObservedGeneration: 7, LastTransitionTime: at},
	}
	st.Outputs = shared.StackOutputs{}
	for i := range 50 {
		raw, _ := json.Marshal(map[string]any{"url": fmt.Sprintf("https://web-%02d.apps.example.com", i), "port": 443})
		st.Outputs[fmt.Sprintf("output%02d", i)] = apiextensionsv1.JSON{Raw: raw}
	}
	st.LastUpdate = &shared.StackUpdateState{
		Name: "web-00000009", Type: autov1alpha1.UpType, State: shared.SucceededStackStateMessage, Generation: 7,
		LastAttemptedCommit: "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d", LastSuccessfulCommit: "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d",
		LastResyncTime: at, Message: "update succeeded",
	}
	for i := range pulumiv1.MaxHistory {
		st.History = append(st.History, shared.UpdateRecord{
			Name: fmt.Sprintf("web-%08x", 9-i), Type: autov1alpha1.UpType, State: shared.SucceededStackStateMessage,
			Generation: 7, Commit: "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d", Message: "update succeeded",
			StartTime: at, EndTime: at, Changes: map[string]int64{"same": 45, "update": 2},
		})
	}
	return stack
}

// BenchmarkPatch measures the Patcher's work at the end of one Stack
// reconcile, from the snapshot (NewPatcher) to the patches it would send:
// "noop", a reconcile that changed nothing (the common case: a resync that
// finds the stack up to date), and "recorded", one that recorded a new
// update (lastUpdate, a new history entry, two outputs changed,
// conditions and observedGeneration) and added a label.
func BenchmarkPatch(b *testing.B) {
	before := benchStackStatus()
	recorded := before.DeepCopy()
	recorded.Generation = 8
	recorded.Labels = map[string]string{"stackyard.dev/pipeline": "web"}
	st := &recorded.Status
	st.ObservedGeneration = 8
	now := metav1.NewTime(time.Date(2026, 11, 25, 14, 5, 0, 0, time.UTC))
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = 8
		st.Conditions[i].LastTransitionTime = now
	}
	st.Outputs["output07"] = apiextensionsv1.JSON{Raw: []byte(`{"url":"https://web-07.apps.example.com","port":8443}`)}
	st.Outputs["output08"] = apiextensionsv1.JSON{Raw: []byte(`"[secret]"`)}
	st.LastUpdate = st.LastUpdate.DeepCopy()
	st.LastUpdate.Name, st.LastUpdate.Generation, st.LastUpdate.LastResyncTime = "web-0000000a", 8, now
	st.History = append([]shared.UpdateRecord{{
		Name: "web-0000000a", Type: autov1alpha1.UpType, State: shared.SucceededStackStateMessage, Generation: 8,
		Commit: "3f2c1a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", StartTime: now, EndTime: now, Changes: map[string]int64{"same": 44, "create": 1},
	}}, st.History[:pulumiv1.MaxHistory-1]...)

	for _, tc := range []struct {
		name  string
		after *pulumiv1.Stack
		sent  int
	}{{"noop", before.DeepCopy(), 0}, {"recorded", recorded, 2}} {
		b.Run(tc.name, func(b *testing.B) {
			c := &countingClient{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c.sent = 0
				if err := NewPatcher(c, before).Patch(ctx, tc.after); err != nil {
					b.Fatal(err)
				}
				if c.sent != tc.sent {
					b.Fatalf("the Patcher sent %d patches, want %d", c.sent, tc.sent)
				}
			}
			b.ReportMetric(float64(len(c.patch)), "patch-bytes")
		})
	}
}
