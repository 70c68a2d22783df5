package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/update"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// The benchmarks of this file measure the pure work of one Stack reconcile,
// with no API server: rendering the Workspace and the Update from the
// Stack, and recording a finished Update (its result, outputs and history)
// into the Stack's status. docs/go-benchmarks.md has their numbers;
// `make bench-go` runs them.

// benchStack returns a Stack as a platform team writes one: a backend, an
// access token, 20 config keys (strings, a number, a structured value), 2
// configRef keys, 3 secrets, 3 secretsRef (literal, Secret, env), 10 envRefs
// (literal and Secret), envs, envSecrets and, when withTemplate, a
// workspaceTemplate setting the image, resources and two variables.
func benchStack(b *testing.B, withTemplate bool) *pulumiv1.Stack {
	b.Helper()
	spec := map[string]any{
		"stack":             "acme/web/prod",
		"backend":           "s3://acme-pulumi-state?region=eu-west-1",
		"accessTokenSecret": "pulumi-token",
		"secretsProvider":   "awskms://alias/pulumi?region=eu-west-1",
		"envs":              []string{"web-env", "shared-env"},
		"envSecrets":        []string{"web-creds"},
		"refresh":           true,
	}
	config := map[string]any{}
	for i := range 18 {
		config[fmt.Sprintf("web:setting%02d", i)] = fmt.Sprintf("value-%02d-of-a-typical-length", i)
	}
	config["web:replicas"] = 3
	config["web:tags"] = map[string]any{"team": "platform", "cost-center": "4711", "zones": []string{"a", "b", "c"}}
	spec["config"] = config
	spec["configRef"] = map[string]any{
		"web:dbHost": map[string]any{"name": "db", "key": "host"},
		"web:limits": map[string]any{"name": "limits", "key": "json", "json": true},
	}
	spec["secrets"] = map[string]any{
		"web:apiKey":     "literal-api-key",
		"web:sessionKey": "literal-session-key",
		"web:smtpPass":   "literal-smtp-password",
	}
	spec["secretsRef"] = map[string]any{
		"web:dbPassword": map[string]any{"type": "Secret", "secret": map[string]any{"name": "db", "key": "password"}},
		"web:license":    map[string]any{"type": "Literal", "literal": map[string]any{"value": "XXXX-YYYY"}},
		"web:token":      map[string]any{"type": "Env", "env": map[string]any{"name": "WEB_TOKEN"}},
	}
	envRefs := map[string]any{}
	for i := range 10 {
		name := fmt.Sprintf("APP_VAR_%02d", i)
		if i%3 == 0 {
			envRefs[name] = map[string]any{"type": "Secret", "secret": map[string]any{"name": "app-env", "key": name}}
			continue
		}
		envRefs[name] = map[string]any{"type": "Literal", "literal": map[string]any{"value": "literal-" + name}}
	}
	spec["envRefs"] = envRefs
	if withTemplate {
		spec["workspaceTemplate"] = map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "platform"}},
			"spec": map[string]any{
				"image":     "pulumi/pulumi:3.170.0-nonroot",
				"resources": map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "512Mi"}},
				"env": []any{
					map[string]any{"name": "AWS_REGION", "value": "eu-west-1"},
					map[string]any{"name": "PULUMI_BACKEND_URL", "value": "s3://acme-pulumi-state?region=eu-west-1&awssdk=v2"},
				},
			},
		}
	}
	doc, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Generation: 7}}
	if err := yaml.Unmarshal(doc, &stack.Spec); err != nil {
		b.Fatalf("the benchmark's Stack spec does not decode: %v", err)
	}
	return stack
}

// BenchmarkBuildWorkspace measures rendering the Workspace a Stack needs
// (stackrun.BuildWorkspace), which every reconcile of every Stack does before its
// server-side apply: without a workspaceTemplate, and with one, which is
// merged as a strategic merge patch.
func BenchmarkBuildWorkspace(b *testing.B) {
	src := stackrun.Source{
		Git:      &autov1alpha1.GitSource{URL: "https://git.example.com/acme/web.git", Ref: "3f2c1a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", Dir: "infra"},
		Revision: "3f2c1a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39",
	}
	for _, tc := range []struct {
		name     string
		template bool
	}{{"plain", false}, {"template", true}} {
		b.Run(tc.name, func(b *testing.B) {
			stack := benchStack(b, tc.template)
			ws, err := stackrun.BuildWorkspace(stack, src)
			if err != nil {
				b.Fatalf("BuildWorkspace: %v", err)
			}
			// 20 config keys, 2 configRef, 3 secrets and 3 secretsRef.
			if got := len(ws.Spec.Stacks[0].Config); got != 28 {
				b.Fatalf("the Workspace has %d config items, want 28", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := stackrun.BuildWorkspace(stack, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuildUpdate measures rendering the Update that runs an up for
// a Stack (BuildUpdate), with an updateTemplate that sets a TTL and an
// annotation, as the reconcile that starts an update does.
func BenchmarkBuildUpdate(b *testing.B) {
	stack := benchStack(b, false)
	stack.Spec.UpdateTemplate = &autov1alpha1.UpdateTemplate{
		Metadata: &autov1alpha1.EmbeddedObjectMeta{Annotations: map[string]string{"acme.example/owner": "platform"}},
		Spec:     &autov1alpha1.UpdateSpec{TtlAfterCompleted: &metav1.Duration{Duration: time.Hour}},
	}
	stack.Status.LastUpdate = &shared.StackUpdateState{Name: "web-0a1b2c3d", LastResyncTime: metav1.Now()}
	b.ReportAllocs()
	for b.Loop() {
		upd := stackrun.BuildUpdate(stack, stackrun.UpdateFor{Revision: "3f2c1a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", Type: autov1alpha1.UpType, Trigger: string(TriggerResync)})
		if upd.Spec.TtlAfterCompleted.Duration != time.Hour {
			b.Fatalf("the updateTemplate's TTL was not applied: %v", upd.Spec.TtlAfterCompleted)
		}
	}
}

// outputsReader answers Get for one outputs Secret, from memory: the
// benchmark measures what recordUpdate does with the Secret, not a client.
type outputsReader struct {
	client.Client
	secret *corev1.Secret
}

func (r outputsReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s, ok := obj.(*corev1.Secret)
	if !ok || key.Name != r.secret.Name {
		return fmt.Errorf("the benchmark reads only Secret %s, not %T %s", r.secret.Name, obj, key.Name)
	}
	r.secret.DeepCopyInto(s)
	return nil
}

// BenchmarkRecordUpdate measures ingesting a finished, successful up into
// the Stack's status (recordUpdate): lastUpdate, the 50 outputs read from
// the Update's outputs Secret (5 of them secret, masked) and a new entry
// at the front of a full history.
func BenchmarkRecordUpdate(b *testing.B) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: update.OutputsSecretName("web-0a1b2c3d"), Namespace: "apps"},
		Data:       map[string][]byte{},
	}
	var secretKeys []string
	for i := range 50 {
		key := fmt.Sprintf("output%02d", i)
		switch {
		case i%10 == 0:
			secretKeys = append(secretKeys, key)
			secret.Data[key] = []byte(`"a-secret-value"`)
		case i%4 == 0:
			secret.Data[key] = []byte(fmt.Sprintf(`{"arn":"arn:aws:s3:::bucket-%02d","tags":{"team":"platform"},"ports":[80,443]}`, i))
		default:
			secret.Data[key] = []byte(fmt.Sprintf(`"https://web-%02d.apps.example.com"`, i))
		}
	}
	mask, _ := json.Marshal(secretKeys)
	secret.Annotations = map[string]string{autov1alpha1.SecretOutputsAnnotation: string(mask)}

	upd := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0a1b2c3d", Namespace: "apps", Annotations: map[string]string{stackrun.TriggerAnnotation: string(TriggerResync)}},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "web", StackName: "acme/web/prod", Type: autov1alpha1.UpType},
		Status: autov1alpha1.UpdateStatus{
			Message:     "update succeeded",
			Outputs:     secret.Name,
			Permalink:   "https://dashboard.example.com/apps/updates/web-0a1b2c3d",
			StartTime:   metav1.NewTime(time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)),
			EndTime:     metav1.NewTime(time.Date(2026, 11, 25, 14, 1, 30, 0, time.UTC)),
			Changes:     map[string]int64{"same": 41, "update": 3, "create": 1},
			ProjectInfo: &autov1alpha1.ProjectInfo{Name: "web", Runtime: "yaml"},
		},
	}
	upd.Status.MarkSucceeded("update succeeded")
	if done, failed, _ := updateDone(upd); !done || failed {
		b.Fatalf("the benchmark's Update is not a finished success: done=%v failed=%v", done, failed)
	}

	stack := benchStack(b, false)
	for i := range pulumiv1.MaxHistory {
		stack.Status.History = append(stack.Status.History, shared.UpdateRecord{
			Name: fmt.Sprintf("web-%08x", i), Type: autov1alpha1.UpType, State: shared.SucceededStackStateMessage,
			Generation: 6, Commit: "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d", Message: "update succeeded",
			Changes: map[string]int64{"same": 45},
		})
	}
	apimeta.SetStatusCondition(&stack.Status.Conditions, metav1.Condition{Type: pulumiv1.DriftDetectedCondition, Status: metav1.ConditionFalse, Reason: "NoDrift"})
	stack.Status.LastUpdate = &shared.StackUpdateState{Name: "web-00000000", State: shared.SucceededStackStateMessage, LastSuccessfulCommit: "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"}
	stack.Status.CurrentUpdate = &shared.CurrentStackUpdate{Name: upd.Name, Generation: 7, Commit: "3f2c1a9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"}
	before := stack.Status

	s := &session{r: &Reconciler{Client: outputsReader{secret: secret}}, stack: stack, now: time.Date(2026, 11, 25, 14, 2, 0, 0, time.UTC)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		// recordUpdate replaces lastUpdate, outputs and history; it
		// changes none of the values they held, so the shallow copy of
		// the status before is a fresh start.
		stack.Status = before
		if err := s.recordUpdate(ctx, upd, false, ""); err != nil {
			b.Fatal(err)
		}
	}
	st := &stack.Status
	if len(st.Outputs) != 50 || string(st.Outputs["output00"].Raw) != `"[secret]"` || len(st.History) != pulumiv1.MaxHistory || st.History[0].Name != upd.Name {
		b.Fatalf("recordUpdate recorded %d outputs (output00=%s) and %d history entries", len(st.Outputs), st.Outputs["output00"].Raw, len(st.History))
	}
}
