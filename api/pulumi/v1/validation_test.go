package v1_test

import (
	"strings"
	"testing"

	"github.com/stackyard/stackyard/api/internal/crdtest"
)

// baseStack is a minimal valid Stack; each case below changes it.
const baseStack = `
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: nginx
  namespace: default
spec:
  stack: org/nginx/dev
  projectRepo: https://github.com/pulumi/examples
  commit: 03658b5514f08970f350618a6e6fdf1bd75f45d0
`

func spec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }

func ref(typ string, selector map[string]any) map[string]any {
	r := map[string]any{"type": typ}
	for k, v := range selector {
		r[k] = v
	}
	return r
}

func TestStackCRDIsAccepted(t *testing.T) {
	for _, name := range []string{"stacks.pulumi.com", "programs.pulumi.com"} {
		t.Run(name, func(t *testing.T) {
			if errs := crdtest.Load(t, name).DefinitionErrors(); len(errs) > 0 {
				t.Fatalf("the API server would reject the CRD: %v", errs.ToAggregate())
			}
		})
	}
}

func TestStackValidation(t *testing.T) {
	crd := crdtest.Load(t, "stacks.pulumi.com")
	tests := []struct {
		name    string
		mutate  func(obj map[string]any)
		wantErr string // empty: the object is valid
	}{
		{name: "git source with commit"},
		{name: "git source with branch", mutate: func(o map[string]any) {
			delete(spec(o), "commit")
			spec(o)["branch"] = "master"
		}},
		{name: "flux source", mutate: func(o map[string]any) {
			delete(spec(o), "projectRepo")
			delete(spec(o), "commit")
			spec(o)["fluxSource"] = map[string]any{
				"sourceRef": map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "name": "repo"},
				"dir":       "infra",
			}
		}},
		{name: "program reference", mutate: func(o map[string]any) {
			delete(spec(o), "projectRepo")
			delete(spec(o), "commit")
			spec(o)["programRef"] = map[string]any{"name": "website"}
		}},
		{name: "commit and branch", mutate: func(o map[string]any) {
			spec(o)["branch"] = "master"
		}, wantErr: "spec.commit and spec.branch are mutually exclusive"},
		{name: "a prerequisite's Go duration", mutate: func(o map[string]any) {
			spec(o)["prerequisites"] = []any{map[string]any{"name": "base", "requirement": map[string]any{"succeededWithinDuration": "1h30m"}}}
		}},
		// The API server would store it, and no client could decode the
		// Stack again: the operator's cache of every Stack would fail.
		{name: "a prerequisite's duration no client can read", mutate: func(o map[string]any) {
			spec(o)["prerequisites"] = []any{map[string]any{"name": "base", "requirement": map[string]any{"succeededWithinDuration": "mallory"}}}
		}, wantErr: "spec.prerequisites[0].requirement.succeededWithinDuration"},
		{name: "repository without commit or branch", mutate: func(o map[string]any) {
			delete(spec(o), "commit")
		}, wantErr: "spec.projectRepo needs one of spec.commit or spec.branch"},
		{name: "repository and flux source", mutate: func(o map[string]any) {
			spec(o)["fluxSource"] = map[string]any{
				"sourceRef": map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "name": "repo"},
			}
		}, wantErr: "at most one of spec.projectRepo, spec.fluxSource and spec.programRef"},
		{name: "flux source and program reference", mutate: func(o map[string]any) {
			delete(spec(o), "projectRepo")
			delete(spec(o), "commit")
			spec(o)["programRef"] = map[string]any{"name": "website"}
			spec(o)["fluxSource"] = map[string]any{
				"sourceRef": map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "Bucket", "name": "b"},
			}
		}, wantErr: "at most one of spec.projectRepo, spec.fluxSource and spec.programRef"},
		{name: "name of 42 characters", mutate: func(o map[string]any) {
			o["metadata"].(map[string]any)["name"] = strings.Repeat("a", 42)
		}},
		{name: "name of 43 characters", mutate: func(o map[string]any) {
			o["metadata"].(map[string]any)["name"] = strings.Repeat("a", 43)
		}, wantErr: "metadata.name must be at most 42 characters"},
		{name: "resync frequency 0", mutate: func(o map[string]any) {
			spec(o)["resyncFrequencySeconds"] = int64(0)
		}},
		{name: "resync frequency 60", mutate: func(o map[string]any) {
			spec(o)["resyncFrequencySeconds"] = int64(60)
		}},
		{name: "resync frequency 30 (accepted as upstream does, run as 60)", mutate: func(o map[string]any) {
			spec(o)["resyncFrequencySeconds"] = int64(30)
		}},
		{name: "negative resync frequency", mutate: func(o map[string]any) {
			spec(o)["resyncFrequencySeconds"] = int64(-1)
		}, wantErr: "spec.resyncFrequencySeconds"},
		{name: "every kind of env ref", mutate: func(o map[string]any) {
			spec(o)["envRefs"] = map[string]any{
				"PULUMI_ACCESS_TOKEN": ref("Secret", map[string]any{"secret": map[string]any{"name": "pulumi", "key": "accessToken"}}),
				"A":                   ref("Env", map[string]any{"env": map[string]any{"name": "HOME"}}),
				"B":                   ref("FS", map[string]any{"filesystem": map[string]any{"path": "/etc/b"}}),
				"C":                   ref("Literal", map[string]any{"literal": map[string]any{"value": "c"}}),
			}
		}},
		{name: "secret ref without secret", mutate: func(o map[string]any) {
			spec(o)["envRefs"] = map[string]any{"A": ref("Secret", map[string]any{"literal": map[string]any{"value": "x"}})}
		}, wantErr: "a ResourceRef of type Secret must set secret"},
		{name: "literal ref without literal", mutate: func(o map[string]any) {
			spec(o)["secretsRef"] = map[string]any{"app:key": ref("Literal", nil)}
		}, wantErr: "a ResourceRef of type Literal must set literal"},
		{name: "env ref without env", mutate: func(o map[string]any) {
			spec(o)["gitAuth"] = map[string]any{"accessToken": ref("Env", nil)}
		}, wantErr: "a ResourceRef of type Env must set env"},
		{name: "fs ref without filesystem", mutate: func(o map[string]any) {
			spec(o)["gitAuth"] = map[string]any{"sshAuth": map[string]any{"sshPrivateKey": ref("FS", nil)}}
		}, wantErr: "a ResourceRef of type FS must set filesystem"},
		{name: "unknown ref type", mutate: func(o map[string]any) {
			spec(o)["envRefs"] = map[string]any{"A": ref("ConfigMap", nil)}
		}, wantErr: "Unsupported value: \"ConfigMap\""},
		{name: "github app auth", mutate: func(o map[string]any) {
			secret := func(key string) map[string]any {
				return ref("Secret", map[string]any{"secret": map[string]any{"name": "app", "key": key}})
			}
			spec(o)["gitAuth"] = map[string]any{"githubApp": map[string]any{
				"appID": secret("appID"), "installationID": secret("installationID"), "privateKey": secret("privateKey"),
			}}
		}},
		{name: "structured config", mutate: func(o map[string]any) {
			spec(o)["config"] = map[string]any{
				"aws:region":   "us-east-1",
				"app:replicas": int64(3),
				"app:tags":     map[string]any{"team": "infra"},
				"app:zones":    []any{"a", "b"},
			}
			spec(o)["configRef"] = map[string]any{"app:settings": map[string]any{"name": "cm", "key": "k", "json": true}}
		}},
		{name: "bad reclaim policy", mutate: func(o map[string]any) {
			spec(o)["workspaceReclaimPolicy"] = "Keep"
		}, wantErr: "Unsupported value: \"Keep\""},
		{name: "workspace template", mutate: func(o map[string]any) {
			spec(o)["workspaceTemplate"] = map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"team": "infra"}},
				"spec": map[string]any{
					"image":           "pulumi/pulumi:3.134.1-nonroot",
					"imagePullPolicy": "IfNotPresent",
					"podTemplate": map[string]any{
						// A partial pod spec, without containers, is fine in a template.
						"spec": map[string]any{"nodeSelector": map[string]any{"disk": "ssd"}},
					},
				},
			}
		}},
		{name: "bad pull policy in workspace template", mutate: func(o map[string]any) {
			spec(o)["workspaceTemplate"] = map[string]any{"spec": map[string]any{"imagePullPolicy": "Sometimes"}}
		}, wantErr: "Unsupported value: \"Sometimes\""},
		{name: "bad security profile in workspace template", mutate: func(o map[string]any) {
			spec(o)["workspaceTemplate"] = map[string]any{"spec": map[string]any{"securityProfile": "privileged"}}
		}, wantErr: "Unsupported value: \"privileged\""},
		{name: "update template", mutate: func(o map[string]any) {
			spec(o)["updateTemplate"] = map[string]any{"spec": map[string]any{"ttlAfterCompleted": "42m"}}
		}},
		{name: "bad update type in update template", mutate: func(o map[string]any) {
			spec(o)["updateTemplate"] = map[string]any{"spec": map[string]any{"type": "apply"}}
		}, wantErr: "Unsupported value: \"apply\""},
		{name: "empty stack name", mutate: func(o map[string]any) {
			spec(o)["stack"] = ""
		}, wantErr: "spec.stack"},
	}
	for _, version := range []string{"v1", "v1alpha1"} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				obj := crdtest.FromYAML(t, baseStack)
				obj["apiVersion"] = "pulumi.com/" + version
				if tt.mutate != nil {
					tt.mutate(obj)
				}
				crdtest.ExpectError(t, crd.Validate(t, version, obj), tt.wantErr)
			})
		}
	}
}

func TestProgramValidation(t *testing.T) {
	crd := crdtest.Load(t, "programs.pulumi.com")
	const program = `
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: staticwebsite
program:
  configuration:
    replicas:
      type: Number
      default: 2
  packages:
    talos: https://github.com/example/talos-component@0.1.0
  variables:
    greeting: hello
  resources:
    my-bucket:
      type: aws:s3:BucketV2
    index.html:
      type: aws:s3:BucketObject
      properties:
        bucket: ${my-bucket}
        source:
          fn::stringAsset: <h1>Hello, world!</h1>
      options:
        dependsOn:
          - ${my-bucket}
        customTimeouts:
          create: 5m
    existing:
      type: aws:s3:BucketV2
      get:
        id: my-existing-bucket
  outputs:
    bucketName: ${my-bucket.bucket}
`
	tests := []struct {
		name    string
		mutate  func(obj map[string]any)
		wantErr string
	}{
		{name: "valid program"},
		{name: "resource without type", mutate: func(o map[string]any) {
			res := o["program"].(map[string]any)["resources"].(map[string]any)
			res["broken"] = map[string]any{"properties": map[string]any{"a": "b"}}
		}, wantErr: "type: Required value"},
		{name: "unknown configuration type", mutate: func(o map[string]any) {
			cfg := o["program"].(map[string]any)["configuration"].(map[string]any)
			cfg["flag"] = map[string]any{"type": "Bool"}
		}, wantErr: "Unsupported value: \"Bool\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := crdtest.FromYAML(t, program)
			if tt.mutate != nil {
				tt.mutate(obj)
			}
			crdtest.ExpectError(t, crd.Validate(t, "v1", obj), tt.wantErr)
		})
	}
}
