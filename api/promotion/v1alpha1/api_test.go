package v1alpha1_test

import (
	"testing"

	"github.com/stackyard/stackyard/api/internal/crdtest"
)

// TestCRDsAreAccepted checks each CRD as the API server would, CEL rules
// and their cost included.
func TestCRDsAreAccepted(t *testing.T) {
	for _, name := range []string{
		"pipelines.promotion.stackyard.dev", "releases.promotion.stackyard.dev",
		"stages.promotion.stackyard.dev", "promotions.promotion.stackyard.dev", "approvals.promotion.stackyard.dev",
		"interventions.promotion.stackyard.dev", "stackpromotions.promotion.stackyard.dev",
	} {
		t.Run(name, func(t *testing.T) {
			if errs := crdtest.Load(t, name).DefinitionErrors(); len(errs) > 0 {
				t.Errorf("the API server would refuse %s: %v", name, errs)
			}
		})
	}
}

// TestValidation feeds specs through the schema and the CEL rules of
// creation: each mistake is refused naming its field.
func TestValidation(t *testing.T) {
	tests := []struct {
		name, crd, manifest, want string
	}{{
		name: "a pipeline on a branch",
		crd:  "pipelines.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Pipeline
metadata: {name: web, namespace: apps}
spec:
  git: {repoURL: "https://git.example/web.git", branch: main, commitSelectionStrategy: NewestFromBranch}
`,
	}, {
		name: "NewestFromBranch without a branch",
		crd:  "pipelines.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Pipeline
metadata: {name: web, namespace: apps}
spec:
  git: {repoURL: "https://git.example/web.git", commitSelectionStrategy: NewestFromBranch}
`,
		want: "spec.git.branch is required",
	}, {
		name: "a semver constraint without SemVer",
		crd:  "pipelines.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Pipeline
metadata: {name: web, namespace: apps}
spec:
  git: {repoURL: "https://git.example/web.git", branch: main, commitSelectionStrategy: NewestFromBranch, semverConstraint: "^1.0.0"}
`,
		want: "semverConstraint applies only to commitSelectionStrategy SemVer",
	}, {
		name: "a stage fed by itself",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: qa}]
  sources: {stages: [dev, qa]}
`,
		want: "a stage cannot take releases from itself",
	}, {
		name: "a stage fed by nothing",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: qa}]
  sources: {}
`,
		want: "set direct, or list upstream stages",
	}, {
		name: "a stage without stacks",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: qa, namespace: apps}
spec:
  pipeline: web
  stacks: []
  sources: {direct: true}
`,
		want: "name the stage's Stacks in spec.stacks, or select them with spec.stackSelector",
	}, {
		name: "a stage that selects its stacks",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}, matchExpressions: [{key: region, operator: In, values: [eu, us]}]}
  sources: {direct: true}
`,
	}, {
		name: "a stage that names no stacks and selects none",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  sources: {direct: true}
`,
		want: "name the stage's Stacks in spec.stacks, or select them with spec.stackSelector",
	}, {
		name: "policy rules",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: prod}]
  sources: {direct: true}
  policies:
  - {name: big, expression: "counts.total > 20", action: Refuse, message: too big}
  - name: db
    expression: "changes.exists(c, c.op == 'delete')"
    action: RequireApproval
    approval: {required: 2, from: [{group: dba}], requireEach: true}
`,
	}, {
		name: "a RequireApproval rule without approval",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: prod}]
  sources: {direct: true}
  policies: [{name: db, expression: "true", action: RequireApproval}]
`,
		want: "spec.policies[0].approval",
	}, {
		name: "a Refuse rule with approval",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: prod}]
  sources: {direct: true}
  policies: [{name: db, expression: "true", action: Refuse, approval: {required: 1}}]
`,
		want: "set it with action RequireApproval, and only then",
	}, {
		name: "a rule with an unknown action",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: prod}]
  sources: {direct: true}
  policies: [{name: db, expression: "true", action: Warn}]
`,
		want: "spec.policies[0].action",
	}, {
		name: "a rule without an expression",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: prod, namespace: apps}
spec:
  pipeline: web
  stacks: [{name: prod}]
  sources: {direct: true}
  policies: [{name: db, action: Refuse}]
`,
		want: "spec.policies[0].expression",
	}, {
		name: "a release that is not a full SHA",
		crd:  "releases.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Release
metadata: {name: web-abc, namespace: apps}
spec:
  pipeline: web
  commit: {sha: abc}
`,
		want: "spec.commit.sha",
	}, {
		name: "a rollout in waves",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: ["1", "10%", "50%"], maxParallel: 4, failureBudget: "5%", pauseBetweenWaves: 10m, order: {by: Label, label: ring}}
`,
	}, {
		name: "waves and a budget as numbers",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: [1, 10, "100%"], failureBudget: "2"}
`,
	}, {
		name: "a wave of none",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: [0]}
`,
		want: `each wave is a count of at least 1, or a percentage from 1% to 100%`,
	}, {
		name: "a wave of more than all",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: ["150%"]}
`,
		want: `each wave is a count of at least 1, or a percentage from 1% to 100%`,
	}, {
		name: "a wave in words",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: ["half"]}
`,
		want: `each wave is a count of at least 1`,
	}, {
		name: "waves verified without checks",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: [1], verifyEachWave: true}
  verification: {rollbackOnFailure: true}
`,
		want: `spec.rollout.verifyEachWave: Invalid value: spec.rollout.verifyEachWave needs checks in spec.verification.checks`,
	}, {
		name: "waves approved without an approval policy",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {waves: [1], approveEachWave: true}
`,
		want: `spec.rollout.approveEachWave: Invalid value: spec.rollout.approveEachWave needs spec.approval`,
	}, {
		name: "an approval of the first wave",
		crd:  "approvals.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Approval
metadata: {name: a, namespace: apps}
spec: {promotion: edge-1, stage: edge, planDigest: "sha256:x", decision: Approve, user: alice, wave: 1}
`,
		want: `spec.wave: Invalid value: 1: spec.wave in body should be greater than or equal to 2`,
	}, {
		name: "a failure budget in words",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {failureBudget: "some"}
`,
		want: `spec.rollout.failureBudget: Invalid value`,
	}, {
		name: "an order by label without a label",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {order: {by: Label}}
`,
		want: `spec.rollout.order.label: Invalid value`,
	}, {
		name: "a seed for an order by name",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {order: {by: Name, seed: x}}
`,
		want: `seed: set it only with by Random`,
	}, {
		name: "a pause that is not a duration",
		crd:  "stages.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata: {name: edge, namespace: apps}
spec:
  pipeline: web
  stackSelector: {matchLabels: {app: web}}
  sources: {direct: true}
  rollout: {pauseBetweenWaves: soon}
`,
		want: `spec.rollout.pauseBetweenWaves`,
	}, {
		name: "an intervention that jumps",
		crd:  "interventions.promotion.stackyard.dev",
		manifest: `
apiVersion: promotion.stackyard.dev/v1alpha1
kind: Intervention
metadata: {name: x, namespace: apps}
spec: {promotion: edge-1, stage: edge, action: Jump, user: alice}
`,
		want: "spec.action: Unsupported value",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := crdtest.Load(t, tt.crd).Validate(t, "v1alpha1", crdtest.FromYAML(t, tt.manifest))
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			crdtest.ExpectError(t, errs, tt.want)
		})
	}
}
