package v1alpha1_test

import (
	"testing"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/internal/crdtest"
)

// fullWorkspace sets every spec and status field of a Workspace, with the JSON
// names the Pulumi Kubernetes Operator v2 uses. (It sets several sources only
// to cover their names; the API server accepts one at a time.)
const fullWorkspace = `
apiVersion: auto.pulumi.com/v1alpha1
kind: Workspace
metadata:
  name: full
  namespace: default
spec:
  serviceAccountName: pulumi
  securityProfile: baseline
  image: pulumi/pulumi:3.134.1-nonroot
  imagePullPolicy: IfNotPresent
  git:
    url: https://github.com/pulumi/examples
    ref: master
    dir: kubernetes-ts-nginx
    shallow: true
    auth:
      sshPrivateKey: {name: git, key: key}
      username: {name: git, key: user}
      password: {name: git, key: password}
      token: {name: git, key: token}
      githubApp:
        appID: {name: app, key: appID}
        installationID: {name: app, key: installationID}
        privateKey: {name: app, key: privateKey}
  flux: {url: "http://source-controller/a.tar.gz", digest: "sha256:abc", dir: app}
  local: {dir: /share/app}
  projectInfo: {name: app, runtime: nodejs}
  envFrom: [{configMapRef: {name: settings}, prefix: APP_}]
  env:
    - {name: FOO, value: bar}
    - name: PULUMI_ACCESS_TOKEN
      valueFrom: {secretKeyRef: {name: pulumi, key: accessToken}}
  resources:
    requests: {cpu: "1", memory: 1Gi}
  podTemplate:
    metadata:
      labels: {a: b}
      annotations: {c: d}
    spec:
      nodeSelector: {disk: ssd}
      containers:
        - name: pulumi
          resources: {limits: {memory: 2Gi}}
  serviceTemplate:
    metadata: {labels: {a: b}}
  pulumiLogLevel: 5
  skipInstall: true
  stacks:
    - name: dev
      create: true
      secretsProvider: passphrase
      environment: [org/env]
      config:
        - {key: "aws:region", value: us-east-1}
        - {key: "app:obj", value: {a: [1, 2]}, secret: true}
        - {key: "app:list[0]", value: x, path: true}
        - {key: "app:fromEnv", valueFrom: {env: X, json: true}}
        - {key: "app:fromFile", valueFrom: {path: /f}}
status:
  observedGeneration: 3
  address: full-workspace.default:50051
  pulumiVersion: 3.170.0
  conditions:
    - type: Ready
      status: "True"
      reason: Succeeded
      message: ""
      lastTransitionTime: "2025-01-02T03:04:05Z"
`

// fullUpdate sets every spec and status field of an Update.
const fullUpdate = `
apiVersion: auto.pulumi.com/v1alpha1
kind: Update
metadata:
  name: full
  namespace: default
spec:
  workspaceName: full
  stackName: dev
  type: destroy
  ttlAfterCompleted: 1h0m0s
  parallel: 4
  message: cleanup
  expectNoChanges: true
  replace: ["urn:r"]
  target: ["urn:t"]
  targetDependents: true
  refresh: true
  continueOnError: true
  remove: true
  runProgram: true
status:
  observedGeneration: 1
  startTime: "2025-01-02T03:04:05Z"
  endTime: "2025-01-02T03:05:05Z"
  permalink: https://app.pulumi.com/org/project/dev/updates/4
  message: done
  outputs: full-stack-outputs
  conditions:
    - type: Complete
      status: "True"
      reason: Succeeded
      message: ""
      lastTransitionTime: "2025-01-02T03:05:05Z"
  projectInfo: {name: project, runtime: yaml}
`

func TestWireCompatibility(t *testing.T) {
	t.Run("Workspace", func(t *testing.T) {
		var w autov1alpha1.Workspace
		crdtest.RoundTrip(t, fullWorkspace, &w, "spec", "status")
		if w.Spec.Git.Auth.GitHubApp.PrivateKey.Key != "privateKey" || w.Spec.PulumiLogLevel != 5 || !w.Spec.SkipInstall {
			t.Errorf("spec decoded wrongly: %+v", w.Spec)
		}
	})
	t.Run("Update", func(t *testing.T) {
		var u autov1alpha1.Update
		crdtest.RoundTrip(t, fullUpdate, &u, "spec", "status")
	})
}

func TestCRDsAreAccepted(t *testing.T) {
	for _, name := range []string{"workspaces.auto.pulumi.com", "updates.auto.pulumi.com"} {
		t.Run(name, func(t *testing.T) {
			if errs := crdtest.Load(t, name).DefinitionErrors(); len(errs) > 0 {
				t.Fatalf("the API server would reject the CRD: %v", errs.ToAggregate())
			}
		})
	}
}

func TestWorkspaceValidation(t *testing.T) {
	crd := crdtest.Load(t, "workspaces.auto.pulumi.com")
	const base = `
apiVersion: auto.pulumi.com/v1alpha1
kind: Workspace
metadata: {name: w, namespace: default}
spec:
  git: {url: "https://github.com/pulumi/examples", ref: master}
  stacks: [{name: dev, config: [{key: "aws:region", value: us-east-1}]}]
`
	spec := func(o map[string]any) map[string]any { return o["spec"].(map[string]any) }
	tests := []struct {
		name    string
		mutate  func(o map[string]any)
		wantErr string
	}{
		{name: "git source"},
		{name: "project info instead of a source", mutate: func(o map[string]any) {
			delete(spec(o), "git")
			spec(o)["projectInfo"] = map[string]any{"name": "p", "runtime": "go"}
		}},
		{name: "two sources", mutate: func(o map[string]any) {
			spec(o)["local"] = map[string]any{"dir": "/app"}
		}, wantErr: "at most one of spec.git, spec.flux, spec.local and spec.projectInfo"},
		{name: "unknown security profile", mutate: func(o map[string]any) {
			spec(o)["securityProfile"] = "privileged"
		}, wantErr: `Unsupported value: "privileged"`},
		{name: "unknown pull policy", mutate: func(o map[string]any) {
			spec(o)["imagePullPolicy"] = "Sometimes"
		}, wantErr: `Unsupported value: "Sometimes"`},
		{name: "stack without name", mutate: func(o map[string]any) {
			spec(o)["stacks"] = []any{map[string]any{"create": true}}
		}, wantErr: "name: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := crdtest.FromYAML(t, base)
			if tt.mutate != nil {
				tt.mutate(obj)
			}
			crdtest.ExpectError(t, crd.Validate(t, "v1alpha1", obj), tt.wantErr)
		})
	}
}

func TestUpdateValidation(t *testing.T) {
	crd := crdtest.Load(t, "updates.auto.pulumi.com")
	tests := []struct {
		name    string
		typ     string
		wantErr string
	}{
		{name: "preview", typ: "preview"},
		{name: "up", typ: "up"},
		{name: "destroy", typ: "destroy"},
		{name: "refresh", typ: "refresh"},
		{name: "unknown", typ: "apply", wantErr: `Unsupported value: "apply"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := crdtest.FromYAML(t, fullUpdate)
			obj["spec"].(map[string]any)["type"] = tt.typ
			crdtest.ExpectError(t, crd.Validate(t, "v1alpha1", obj), tt.wantErr)
		})
	}
}
