package v1_test

import (
	"testing"

	"github.com/stackyard/stackyard/api/internal/crdtest"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/api/pulumi/v1alpha1"
)

// fullStack sets every spec and status field of a Stack, with the JSON names
// the Pulumi Kubernetes Operator v2 uses. Decoding it strictly proves that no
// field name is unknown to our types; encoding it again proves that none is
// lost. (Commit and branch are both set only to cover both names; the API
// server would refuse that combination.)
const fullStack = `
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: full
  namespace: default
  annotations:
    pulumi.com/reconciliation-request: before-first-update
spec:
  stack: org/project/dev
  backend: s3://state-bucket
  accessTokenSecret: pulumi-token
  envs: [env-config]
  envSecrets: [env-secret]
  envRefs:
    PULUMI_ACCESS_TOKEN:
      type: Secret
      secret: {name: pulumi-api-secret, key: accessToken}
    FROM_ENV: {type: Env, env: {name: HOME}}
    FROM_FILE: {type: FS, filesystem: {path: /etc/hostname}}
    LITERAL: {type: Literal, literal: {value: x}}
  config:
    aws:region: us-east-1
    app:replicas: 3
    app:enabled: true
    app:tags: {team: infra}
    app:zones: [a, b]
  configRef:
    app:settings: {name: settings, key: settings.json, json: true}
  secrets:
    app:password: hunter2
  secretsRef:
    app:apiKey:
      type: Secret
      secret: {name: keys, key: api, namespace: default}
  secretsProvider: passphrase
  environment: [org/shared]
  projectRepo: https://github.com/pulumi/examples
  commit: 03658b5514f08970f350618a6e6fdf1bd75f45d0
  branch: master
  repoDir: kubernetes-ts-nginx/
  shallow: true
  gitAuthSecret: git-credentials
  gitAuth:
    accessToken: {type: Secret, secret: {name: git, key: token}}
    sshAuth:
      sshPrivateKey: {type: Secret, secret: {name: git, key: key}}
      password: {type: Literal, literal: {value: passphrase}}
    basicAuth:
      userName: {type: Literal, literal: {value: me}}
      password: {type: Secret, secret: {name: git, key: password}}
    githubApp:
      appID: {type: Secret, secret: {name: app, key: appID}}
      installationID: {type: Secret, secret: {name: app, key: installationID}}
      privateKey: {type: Secret, secret: {name: app, key: privateKey}}
  fluxSource:
    sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: repo}
    dir: infra
  programRef: {name: website}
  targets: ["urn:pulumi:dev::p::t::a"]
  targetDependents: true
  prerequisites:
    - name: base
      requirement: {succeededWithinDuration: 1h0m0s}
  continueResyncOnCommitMatch: true
  resyncFrequencySeconds: 120
  refresh: true
  expectNoRefreshChanges: true
  destroyOnFinalize: true
  runProgram: true
  retryOnUpdateConflict: true
  retryMaxBackoffDurationSeconds: 3600
  useLocalStackOnly: true
  preview: true
  serviceAccountName: pulumi
  workspaceReclaimPolicy: Delete
  workspaceTemplate:
    metadata:
      labels: {team: infra}
      annotations: {note: x}
    spec:
      serviceAccountName: other
      securityProfile: baseline
      image: pulumi/pulumi:3.134.1-nonroot
      imagePullPolicy: IfNotPresent
      pulumiLogLevel: 3
      skipInstall: true
      env: [{name: FOO, value: bar}]
      envFrom: [{secretRef: {name: creds}}]
      resources:
        requests: {cpu: "1", memory: 1Gi}
        limits: {memory: 2Gi}
      git:
        url: https://github.com/org/repo
        ref: main
        dir: app
        shallow: true
        auth:
          token: {name: git, key: token}
          githubApp:
            appID: {name: app, key: appID}
            installationID: {name: app, key: installationID}
            privateKey: {name: app, key: privateKey}
      flux: {url: "http://source-controller/a.tar.gz", digest: "sha256:abc", dir: app}
      local: {dir: /share/app}
      projectInfo: {name: app, runtime: yaml}
      serviceTemplate:
        metadata: {annotations: {a: b}}
      podTemplate:
        metadata: {labels: {a: b}}
        spec:
          nodeSelector: {disk: ssd}
          containers:
            - name: pulumi
              volumeMounts: [{name: cache, mountPath: /cache}]
          volumes: [{name: cache, emptyDir: {}}]
      stacks:
        - name: dev
          create: true
          secretsProvider: passphrase
          environment: [org/env]
          config:
            - {key: "aws:region", value: us-east-1}
            - {key: "app:obj", value: {a: 1}, secret: true}
            - {key: "app:list[0]", value: x, path: true}
            - {key: "app:fromEnv", valueFrom: {env: X, json: true}}
            - {key: "app:fromFile", valueFrom: {path: /f}}
  updateTemplate:
    metadata:
      labels: {app: x}
    spec:
      workspaceName: w
      stackName: s
      type: up
      ttlAfterCompleted: 42m0s
      parallel: 4
      message: deployed by stackyard
      expectNoChanges: true
      replace: ["urn:r"]
      target: ["urn:t"]
      targetDependents: true
      refresh: true
      continueOnError: true
      remove: true
      runProgram: true
status:
  observedGeneration: 2
  observedReconcileRequest: before-first-update
  conditions:
    - type: Ready
      status: "True"
      reason: ProcessingCompleted
      message: the stack is up to date
      lastTransitionTime: "2025-01-02T03:04:05Z"
      observedGeneration: 2
  lastUpdate:
    generation: 2
    reconcileRequest: before-first-update
    name: full-update
    type: up
    state: succeeded
    message: ok
    lastAttemptedCommit: abc
    lastSuccessfulCommit: abc
    permalink: https://app.pulumi.com/org/project/dev/updates/3
    lastResyncTime: "2025-01-02T03:04:05Z"
    failures: 1
  currentUpdate:
    generation: 3
    reconcileRequest: again
    name: full-update-2
    commit: def
  outputs:
    url: http://example.com
    count: 3
    nested: {a: [1, 2]}
  projectInfo: {name: project, runtime: nodejs}
`

func TestStackWireCompatibility(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		var s pulumiv1.Stack
		crdtest.RoundTrip(t, fullStack, &s, "spec", "status")
		if s.Spec.GitSource == nil || s.Spec.ProjectRepo != "https://github.com/pulumi/examples" {
			t.Errorf("the inline git fields were not decoded: %+v", s.Spec.GitSource)
		}
		if got := s.Annotations[pulumiv1.ReconcileRequestAnnotation]; got != "before-first-update" {
			t.Errorf("reconcile request annotation: got %q", got)
		}
	})
	t.Run("v1alpha1", func(t *testing.T) {
		var s v1alpha1.Stack
		crdtest.RoundTrip(t, fullStack, &s, "spec", "status")
	})
}

func TestProgramWireCompatibility(t *testing.T) {
	const program = `
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: staticwebsite
program:
  configuration:
    replicas: {type: Number, default: 2}
  packages:
    talos: https://github.com/example/talos-component@0.1.0
  variables:
    greeting: hello
  resources:
    my-bucket:
      type: aws:s3:BucketV2
      options:
        additionalSecretOutputs: [arn]
        aliases: [old-bucket]
        customTimeouts: {create: 5m, update: 6m, delete: 7m}
        deleteBeforeReplace: true
        dependsOn: ["${other}"]
        ignoreChanges: [tags]
        import: existing-bucket
        parent: ${parent}
        protect: true
        provider: ${provider}
        providers: {aws: "${provider}"}
        version: 6.0.0
    index.html:
      type: aws:s3:BucketObject
      properties:
        bucket: ${my-bucket}
        source:
          fn::stringAsset: <h1>Hello, world!</h1>
    existing:
      type: aws:s3:BucketV2
      get:
        id: my-existing-bucket
        state: {region: us-east-1}
  outputs:
    bucketName: ${my-bucket.bucket}
status:
  observedGeneration: 1
  artifact:
    path: programs/default/staticwebsite/1.tar.gz
    url: http://stackyard.stackyard-system/programs/default/staticwebsite/1.tar.gz
    revision: "1"
    digest: sha256:abc
    lastUpdateTime: "2025-01-02T03:04:05Z"
    size: 1234
    metadata: {a: b}
`
	var p pulumiv1.Program
	crdtest.RoundTrip(t, program, &p, "program", "status")
}
