package update

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// The benchmarks of this file measure what the Update controller does with
// a finished operation's result, with no API server and no agent: the
// redaction set built from its secret outputs, the outputs Secret, and the
// outcome written into the Update's status. docs/go-benchmarks.md has their
// numbers; `make bench-go` runs them.

// benchOutputs returns the 50 outputs of a typical stack: URLs, names and
// ARNs as strings, a few numbers, structured values (a map with a list),
// and 5 secrets, two of them structured.
func benchOutputs(b *testing.B) map[string]*agentpb.OutputValue {
	b.Helper()
	outputs := map[string]*agentpb.OutputValue{}
	for i := range 50 {
		var v any
		switch {
		case i%10 == 0:
			v = fmt.Sprintf("secret-token-%02d-8c1f0e2d9b3a", i)
		case i%10 == 5 && i < 20:
			v = map[string]any{"username": fmt.Sprintf("admin%02d", i), "password": fmt.Sprintf("pw-%02d-4b7e1c9a", i)}
		case i%7 == 0:
			v = float64(8000 + i)
		case i%4 == 0:
			v = map[string]any{"arn": fmt.Sprintf("arn:aws:s3:::bucket-%02d", i), "tags": map[string]any{"team": "platform"}, "ports": []any{80.0, 443.0}}
		default:
			v = fmt.Sprintf("https://web-%02d.apps.example.com", i)
		}
		pv, err := structpb.NewValue(v)
		if err != nil {
			b.Fatal(err)
		}
		outputs[fmt.Sprintf("output%02d", i)] = &agentpb.OutputValue{Value: pv, Secret: i%10 == 0 || (i%10 == 5 && i < 20)}
	}
	return outputs
}

// benchUpdate returns the Update whose outcome is recorded.
func benchUpdate() *autov1alpha1.Update {
	return &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0a1b2c3d", Namespace: "apps", UID: "6f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f", Generation: 1},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "web", StackName: "acme/web/prod", Type: autov1alpha1.UpType},
	}
}

// BenchmarkSecretOutputs measures building the redaction set of an
// operation's 50 outputs (5 secret) and scrubbing its result message with
// it, which every finished operation does before anything is written.
func BenchmarkSecretOutputs(b *testing.B) {
	outputs := benchOutputs(b)
	msg := "update failed: resource web-bucket: secret-token-20-8c1f0e2d9b3a was refused by the provider: " + strings.Repeat("diagnostic text ", 20)
	b.ReportAllocs()
	for b.Loop() {
		got := secretOutputs(outputs).Redact(msg)
		if strings.Contains(got, "secret-token-20") {
			b.Fatalf("a secret output reached the message: %s", got)
		}
	}
}

// BenchmarkOutputsSecret measures building the outputs Secret of an
// operation's 50 outputs (outputsSecret): each value encoded as JSON, the
// secret keys listed in the annotation, the owner reference set.
func BenchmarkOutputsSecret(b *testing.B) {
	scheme := k8sruntime.NewScheme()
	if err := autov1alpha1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	r := &Reconciler{Scheme: scheme}
	obj := benchUpdate()
	o := &outcome{outputs: benchOutputs(b)}
	b.ReportAllocs()
	for b.Loop() {
		s, err := r.outputsSecret(obj, o)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Data) != 50 {
			b.Fatalf("the outputs Secret holds %d keys, want 50", len(s.Data))
		}
	}
}

// BenchmarkApplyOutcome measures writing a successful outcome into the
// Update's status (outcome.apply): conditions, times, message, change
// counts and the log tail.
func BenchmarkApplyOutcome(b *testing.B) {
	start := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	o := &outcome{
		message: "update succeeded: create=1 same=41 update=3",
		start:   metav1.NewTime(start), end: metav1.NewTime(start.Add(90 * time.Second)),
		permalink:   "https://dashboard.example.com/apps/updates/web-0a1b2c3d",
		projectInfo: &autov1alpha1.ProjectInfo{Name: "web", Runtime: "yaml"},
		changes:     map[string]int32{"create": 1, "same": 41, "update": 3},
	}
	for i := range 20 {
		o.logTail = append(o.logTail, fmt.Sprintf("    ~ aws:s3/bucket:Bucket web-%02d updated (2s) [diff: ~tags]", i))
	}
	obj := benchUpdate()
	b.ReportAllocs()
	for b.Loop() {
		st := autov1alpha1.UpdateStatus{}
		o.apply(&st, obj.Generation, OutputsSecretName(obj.Name), "")
		if !st.IsComplete() {
			b.Fatal("the status is not complete")
		}
	}
}
