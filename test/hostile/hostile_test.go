package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/test/gitserver"
)

// program is the harmless program every git source here serves.
const program = `name: hostile
runtime: yaml
config:
  greeting:
    type: string
    default: hello
resources:
  suffix:
    type: stackyardtest:index:Random
    properties:
      length: 4
outputs:
  greeting: ${greeting}
`

// Outcomes of an object the API server accepted.
const (
	stalled = "Stalled" // kstatus Stalled=True, with a message
	ready   = "Ready"   // the hostile value was harmless, and used as a value
	failed  = "Failed"  // an Update whose operation failed, a Promotion that failed
)

// hostileCase is one object: refused at admission with an error containing
// reject, or accepted and settling as settle with a message containing msg.
type hostileCase struct {
	name   string
	obj    string
	reject string
	settle string
	msg    string
}

// payloads are shell metacharacter strings; each tries to create the
// mark file, which must never appear.
var payloads = []string{
	"$(touch {{MARK}})", "`touch {{MARK}}`", "x; touch {{MARK}}", "x | touch {{MARK}}", "x && touch {{MARK}}",
	"x\ntouch {{MARK}}", "--upload-pack=touch {{MARK}}", "-o ProxyCommand=touch {{MARK}}",
}

// stackYAML is a Stack from the suite's repository, with extra spec lines.
func stackYAML(name, spec string) string {
	return `apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: ` + name + `}
spec:
  stack: ` + name + `
  backend: file://{{STATE}}
` + spec
}

// gitSpec is the spec lines of a git source on the suite's repository;
// pinnedSpec pins its head commit, as a stage's Stacks are.
const (
	gitSpec    = "  projectRepo: {{REPO}}\n  branch: main\n"
	pinnedSpec = "  projectRepo: {{REPO}}\n  commit: {{HEAD}}\n"
)

func cases() []hostileCase {
	cs := []hostileCase{
		// Stack: wrong types, unknown and conflicting fields, bounds.
		{name: "stack: spec.stack a number", obj: stackYAML("s-type", gitSpec) + "  resyncFrequencySeconds: 60\n", settle: ready},
		{name: "stack: unknown field", obj: stackYAML("s-unknown", gitSpec+"  bogus: 1\n"), reject: `unknown field "spec.bogus"`},
		{name: "stack: resync a string", obj: stackYAML("s-resync", gitSpec+"  resyncFrequencySeconds: soon\n"), reject: "spec.resyncFrequencySeconds"},
		{name: "stack: resync negative", obj: stackYAML("s-neg", gitSpec+"  resyncFrequencySeconds: -5\n"), reject: "spec.resyncFrequencySeconds"},
		{name: "stack: refresh not a boolean", obj: stackYAML("s-bool", gitSpec+"  refresh: sometimes\n"), reject: "spec.refresh"},
		{name: "stack: name too long", obj: stackYAML(strings.Repeat("n", 43), gitSpec), reject: "metadata.name"},
		{name: "stack: commit and branch", obj: stackYAML("s-both", gitSpec+"  commit: 0123456789abcdef0123456789abcdef01234567\n"), reject: "spec.commit and spec.branch are mutually exclusive"},
		{name: "stack: repo without a ref", obj: stackYAML("s-noref", "  projectRepo: {{REPO}}\n"), reject: "spec.projectRepo needs one of spec.commit or spec.branch"},
		{name: "stack: two sources", obj: stackYAML("s-two", gitSpec+"  programRef: {name: p}\n"), reject: "at most one of spec.projectRepo, spec.fluxSource and spec.programRef"},
		{name: "stack: itself as prerequisite", obj: stackYAML("s-self", gitSpec+"  prerequisites: [{name: s-self}]\n"), reject: "spec.prerequisites"},
		{name: "stack: secret key twice", obj: stackYAML("s-dup", gitSpec+"  secrets: {k: v}\n  secretsRef: {k: {type: Literal, literal: {value: v}}}\n"), reject: "spec.secretsRef[k]"},
		{name: "stack: envRefs type unknown", obj: stackYAML("s-envref", gitSpec+"  envRefs: {X: {type: Shell}}\n"), reject: "spec.envRefs.X.type"},
		{name: "stack: envRefs Secret without its selector", obj: stackYAML("s-envsel", gitSpec+"  envRefs: {X: {type: Secret}}\n"), reject: "spec.envRefs[X]"},
		{name: "stack: config not a map", obj: stackYAML("s-cfg", gitSpec+"  config: [a, b]\n"), reject: "spec.config"},
		{name: "stack: prerequisites not a list", obj: stackYAML("s-prq", gitSpec+"  prerequisites: s-other\n"), reject: "spec.prerequisites"},

		// Stack: accepted, then stalled naming what is wrong.
		{name: "stack: repoDir escapes the source", obj: stackYAML("s-trav", gitSpec+"  repoDir: ../../../../etc\n"), settle: stalled, msg: "spec.repoDir"},
		{name: "stack: repoDir absolute", obj: stackYAML("s-abs", gitSpec+"  repoDir: /etc\n"), settle: stalled, msg: "spec.repoDir"},
		{name: "stack: ext:: repository", obj: stackYAML("s-ext", "  projectRepo: 'ext::sh -c touch% {{MARK}}'\n  branch: main\n"), settle: stalled, msg: "spec.projectRepo"},
		{name: "stack: file:// repository", obj: stackYAML("s-file", "  projectRepo: file:///etc\n  branch: main\n"), settle: stalled, msg: "spec.projectRepo"},
		{name: "stack: branch that does not exist", obj: stackYAML("s-nobranch", "  projectRepo: {{REPO}}\n  branch: gone\n"), settle: stalled, msg: "spec.branch"},
		{name: "stack: commit that is not a SHA", obj: stackYAML("s-badsha", "  projectRepo: {{REPO}}\n  commit: HEAD~1\n"), settle: stalled, msg: "spec.commit"},
		{name: "stack: cross-namespace Secret", obj: stackYAML("s-xns", gitSpec+"  secretsRef: {k: {type: Secret, secret: {namespace: kube-system, name: admin, key: token}}}\n"), settle: stalled, msg: "spec.secretsRef[k]"},
		{name: "stack: missing Secret", obj: stackYAML("s-nosecret", gitSpec+"  secretsRef: {k: {type: Secret, secret: {name: none, key: token}}}\n"), settle: stalled, msg: "spec.secretsRef[k].secret"},
		{name: "stack: missing ConfigMap in envs", obj: stackYAML("s-noenvs", gitSpec+"  envs: [none]\n"), settle: stalled, msg: "spec.envs[0]"},
		{name: "stack: missing Program", obj: stackYAML("s-noprog", "  programRef: {name: none}\n"), settle: stalled, msg: "none"},
		{name: "stack: prerequisite cycle", obj: stackYAML("s-cyc-a", gitSpec+"  prerequisites: [{name: s-cyc-b}]\n") + "---\n" + stackYAML("s-cyc-b", gitSpec+"  prerequisites: [{name: s-cyc-a}]\n"), settle: stalled, msg: "spec.prerequisites[0]"},
		{name: "stack: huge config value, harmless", obj: stackYAML("s-huge", gitSpec+"  config: {hostile:greeting: '"+strings.Repeat("x", 64<<10)+"'}\n"), settle: ready},

		// Program.
		{name: "program: unknown field", obj: "apiVersion: pulumi.com/v1\nkind: Program\nmetadata: {name: p-unknown}\nprogram: {bogus: 1}\n", reject: "bogus"},
		{name: "program: resources not a map", obj: "apiVersion: pulumi.com/v1\nkind: Program\nmetadata: {name: p-res}\nprogram: {resources: [a]}\n", reject: "program.resources"},
		{name: "program: resource without a type", obj: "apiVersion: pulumi.com/v1\nkind: Program\nmetadata: {name: p-notype}\nprogram: {resources: {r: {properties: {a: 1}}}}\n", reject: "program.resources.r.type"},

		// Workspace and Update, written by hand.
		{name: "workspace: unknown field", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Workspace\nmetadata: {name: w-unknown}\nspec: {bogus: 1}\n", reject: `unknown field "spec.bogus"`},
		{name: "workspace: stacks not a list", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Workspace\nmetadata: {name: w-stacks}\nspec: {stacks: dev}\n", reject: "spec.stacks"},
		{name: "workspace: ext:: git url", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Workspace\nmetadata: {name: w-ext}\nspec: {git: {url: 'ext::sh -c touch% {{MARK}}', ref: main}}\n", settle: stalled, msg: "spec.git.url"},
		{name: "workspace: git dir escapes", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Workspace\nmetadata: {name: w-dir}\nspec: {git: {url: '{{REPO}}', ref: main, dir: ../../..}}\n", settle: stalled, msg: "spec.git.dir"},
		{name: "update: type unknown", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Update\nmetadata: {name: u-type}\nspec: {workspaceName: w, stackName: dev, type: nuke}\n", reject: "spec.type"},
		{name: "update: parallel a string", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Update\nmetadata: {name: u-par}\nspec: {workspaceName: w, stackName: dev, type: up, parallel: many}\n", reject: "spec.parallel"},
		{name: "update: no stack name", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Update\nmetadata: {name: u-nostack}\nspec: {workspaceName: w, type: up}\n", settle: failed, msg: "stackName"},

		// Pipelines and stages.
		{name: "pipeline: unknown field", obj: pipelineYAML("pl-unknown", "  bogus: 1\n"), reject: `unknown field "spec.bogus"`},
		{name: "pipeline: no repository", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: pl-norepo}\nspec: {git: {branch: main}}\n", reject: "spec.git.repoURL"},
		{name: "pipeline: retention negative", obj: pipelineYAML("pl-ret", "  releaseRetention: -1\n"), reject: "spec.releaseRetention"},
		{name: "pipeline: interval a number", obj: pipelineYAML("pl-int", "  interval: 30\n"), reject: "spec.interval"},
		{name: "pipeline: invalid semver range", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: pl-semver}\nspec: {git: {repoURL: '{{REPO}}', commitSelectionStrategy: SemVer, semverConstraint: '>>1.x;rm'}}\n", settle: stalled, msg: "spec.git.semverConstraint"},
		{name: "pipeline: ext:: repository", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: pl-ext}\nspec: {git: {repoURL: 'ext::sh -c touch% {{MARK}}', branch: main}}\n", settle: stalled, msg: "spec.git.repoURL"},
		{name: "pipeline: branch that does not exist", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: pl-nobranch}\nspec: {git: {repoURL: '{{REPO}}', branch: gone}}\n", settle: stalled, msg: "spec.git.branch"},
		{name: "stage: no sources", obj: stageYAML("st-nosrc", "  sources: {}\n"), reject: "spec.sources"},
		{name: "stage: itself upstream", obj: stageYAML("st-self", "  sources: {stages: [st-self]}\n"), reject: "spec.sources.stages"},
		{name: "stage: no stacks", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Stage\nmetadata: {name: st-nostack}\nspec: {pipeline: pl, stacks: [], sources: {direct: true}}\n", reject: "spec.stacks"},
		{name: "stage: approvals negative", obj: stageYAML("st-appr", "  sources: {direct: true}\n  approval: {required: -1}\n"), reject: "spec.approval.required"},
		{name: "stage: strategy unknown", obj: stageYAML("st-strat", "  sources: {stages: [a, b], availabilityStrategy: Most}\n"), reject: "spec.sources.availabilityStrategy"},
		{name: "stage: cycle", obj: stageYAML("st-cyc-a", "  sources: {stages: [st-cyc-b]}\n") + "---\n" + stageYAML("st-cyc-b", "  sources: {stages: [st-cyc-a]}\n") + "---\n" + pipelineYAML("pl", "") +
			"---\n" + stackYAML("st-cyc-a-stack", pinnedSpec) + "---\n" + stackYAML("st-cyc-b-stack", pinnedSpec), settle: stalled, msg: "cycle"},
		{name: "stage: unknown pipeline", obj: stageYAML("st-nopl", "  sources: {direct: true}\n"), settle: stalled, msg: "pl-none"},

		{name: "stack: envs not a list", obj: stackYAML("s-envs", gitSpec+"  envs: config\n"), reject: "spec.envs"},
		{name: "stack: reclaim policy unknown", obj: stackYAML("s-reclaim", gitSpec+"  workspaceReclaimPolicy: Shred\n"), reject: "spec.workspaceReclaimPolicy"},
		{name: "stack: destroyOnFinalize a string", obj: stackYAML("s-dof", gitSpec+"  destroyOnFinalize: please\n"), reject: "spec.destroyOnFinalize"},
		{name: "stack: gitAuth a string", obj: stackYAML("s-gitauth", gitSpec+"  gitAuth: token\n"), reject: "spec.gitAuth"},
		{name: "stack: prerequisite without a name", obj: stackYAML("s-prqname", gitSpec+"  prerequisites: [{requirement: {succeededWithinDuration: 1h}}]\n"), reject: "spec.prerequisites[0].name"},
		{name: "update: target not a list", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Update\nmetadata: {name: u-target}\nspec: {workspaceName: w, stackName: dev, type: up, target: urn}\n", reject: "spec.target"},
		{name: "update: ttl not a duration", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Update\nmetadata: {name: u-ttl}\nspec: {workspaceName: w, stackName: dev, type: up, ttlAfterCompleted: [1]}\n", reject: "spec.ttlAfterCompleted"},
		{name: "workspace: security profile unknown", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Workspace\nmetadata: {name: w-prof}\nspec: {securityProfile: open}\n", reject: "spec.securityProfile"},
		{name: "workspace: image a number", obj: "apiVersion: auto.pulumi.com/v1alpha1\nkind: Workspace\nmetadata: {name: w-image}\nspec: {image: 42}\n", reject: "spec.image"},
		{name: "promotion: unknown field", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Promotion\nmetadata: {name: pr-unknown}\nspec: {stage: s, release: r, bogus: 1}\n", reject: `unknown field "spec.bogus"`},
		{name: "promotion: rollback a string", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Promotion\nmetadata: {name: pr-rb}\nspec: {stage: s, release: r, rollback: yes please}\n", reject: "spec.rollback"},
		{name: "release: no commit", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Release\nmetadata: {name: rel-nocommit}\nspec: {pipeline: pl}\n", reject: "spec.commit"},
		{name: "stage: window kind unknown", obj: stageYAML("st-win", "  sources: {direct: true}\n  promotionWindows: [{kind: Sometimes, rrule: 'FREQ=DAILY', dtstart: '2026-01-01T09:00:00Z', dtend: '2026-01-01T17:00:00Z'}]\n"), reject: "spec.promotionWindows[0].kind"},
		{name: "stage: soak time not a duration", obj: stageYAML("st-soak", "  sources: {stages: [a], requiredSoakTime: [1]}\n"), reject: "spec.sources.requiredSoakTime"},
		{name: "stage: freeze a string", obj: stageYAML("st-freeze", "  sources: {direct: true}\n  freeze: now\n"), reject: "spec.freeze"},

		{name: "stage: window rule that is not an RRULE", obj: stageYAML("st-rrule", "  sources: {direct: true}\n  promotionWindows: [{kind: Allow, rrule: 'EVERY;rm -rf /', dtstart: '2026-01-01T09:00:00Z', dtend: '2026-01-01T17:00:00Z'}]\n") +
			"---\n" + pipelineYAML("pl", "") + "---\n" + stackYAML("st-rrule-stack", pinnedSpec), settle: stalled, msg: "spec.promotionWindows[0]"},
		// Promotions and approvals: the policies hold them to the truth.
		{name: "promotion: requested for someone else", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Promotion\nmetadata: {name: pr-other}\nspec: {stage: s, release: r, requestedBy: somebody-else}\n", reject: "spec.requestedBy"},
		{name: "approval: for someone else", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Approval\nmetadata: {name: ap-other}\nspec: {promotion: p, stage: s, planDigest: sha256:x, decision: Approve, user: somebody-else}\n", reject: "spec.user"},
		{name: "approval: decision unknown", obj: "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Approval\nmetadata: {name: ap-dec}\nspec: {promotion: p, stage: s, planDigest: sha256:x, decision: Maybe, user: u}\n", reject: "spec.decision"},
	}
	// Metacharacters in every string that reaches a command line: the
	// branch (git), the Pulumi stack name and a config value (pulumi), a
	// target (pulumi up --target).
	for i, p := range payloads {
		quoted := fmt.Sprintf("%q", p)
		cs = append(cs,
			hostileCase{name: fmt.Sprintf("stack: branch with metacharacters %d", i),
				obj: stackYAML(fmt.Sprintf("s-br-%d", i), "  projectRepo: {{REPO}}\n  branch: "+quoted+"\n"), settle: stalled, msg: "spec.branch"},
			hostileCase{name: fmt.Sprintf("stack: config value with metacharacters %d", i),
				obj: stackYAML(fmt.Sprintf("s-cv-%d", i), gitSpec+"  config: {hostile:greeting: "+quoted+"}\n"), settle: ready},
			hostileCase{name: fmt.Sprintf("stack: repoDir with metacharacters %d", i),
				obj: stackYAML(fmt.Sprintf("s-rd-%d", i), gitSpec+"  repoDir: "+quoted+"\n"), settle: stalled, msg: "spec.repoDir"},
			hostileCase{name: fmt.Sprintf("pipeline: include path with metacharacters %d", i),
				obj: pipelineYAML(fmt.Sprintf("pl-ip-%d", i), "  git: {repoURL: '{{REPO}}', branch: main, includePaths: ["+quoted+"]}\n"), settle: ready},
		)
	}
	return cs
}

func pipelineYAML(name, spec string) string {
	if !strings.Contains(spec, "git:") {
		spec = "  git: {repoURL: '{{REPO}}', branch: main}\n" + spec
	}
	return "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

func stageYAML(name, spec string) string {
	pipeline := "pl"
	if name == "st-nopl" {
		pipeline = "pl-none"
	}
	return "apiVersion: promotion.stackyard.dev/v1alpha1\nkind: Stage\nmetadata: {name: " + name + "}\nspec:\n  pipeline: " + pipeline +
		"\n  stacks: [{name: " + name + "-stack}]\n" + spec
}

func TestHostileObjects(t *testing.T) {
	repo := gitserver.New(t).CreateRepo("hostile")
	head := repo.Commit("main", map[string]string{"Pulumi.yaml": program})
	state := t.TempDir()
	all := cases()
	// The corpus is counted per object; it must stay at 100 or more.
	n := 0
	for _, c := range all {
		n += strings.Count(c.obj, "\nkind: ")
	}
	if n < 100 {
		t.Fatalf("the corpus has %d objects, want at least 100", n)
	}
	for i, c := range all {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			ns := env.NewNamespace(t, "hostile-")
			mark := filepath.Join(markDir, fmt.Sprint(i))
			text := strings.NewReplacer("{{REPO}}", repo.URL, "{{HEAD}}", head, "{{STATE}}", state, "{{MARK}}", mark).Replace(c.obj)
			var objs []*unstructured.Unstructured
			for _, doc := range strings.Split(text, "\n---\n") {
				u := &unstructured.Unstructured{}
				g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed(), doc)
				u.SetNamespace(ns)
				objs = append(objs, u)
			}
			var createErr error
			for _, u := range objs {
				if createErr = env.Client.Create(ctx, u, client.FieldValidation("Strict")); createErr != nil {
					break
				}
			}
			if c.reject != "" {
				g.Expect(createErr).To(HaveOccurred(), "accepted, want refused naming %s", c.reject)
				g.Expect(createErr.Error()).To(ContainSubstring(c.reject))
				return
			}
			g.Expect(createErr).NotTo(HaveOccurred())
			u := objs[0]
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
				state, msg := settled(u)
				g.Expect(state).To(Equal(c.settle), "%s: %s", state, msg)
				g.Expect(msg).To(ContainSubstring(c.msg))
			}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
			_, err := os.Stat(mark)
			g.Expect(os.IsNotExist(err)).To(BeTrue(), "a smuggled command ran: %s exists", mark)
		})
	}
}

// settled says how an accepted object settled: Stalled, Ready or Failed,
// with the message; "" while it has not.
func settled(u *unstructured.Unstructured) (string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	status := map[string]string{}
	message := map[string]string{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status[typ], _ = m["status"].(string)
		message[typ], _ = m["message"].(string)
	}
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase == "Failed" || phase == "Aborted" {
		msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
		return failed, msg
	}
	switch {
	case status["Stalled"] == "True":
		return stalled, message["Stalled"]
	case u.GetKind() == "Update" && status["Failed"] == "True":
		return failed, message["Failed"]
	case status["Ready"] == "True" && status["Reconciling"] != "True":
		return ready, message["Ready"]
	}
	return "", fmt.Sprintf("conditions %v", message)
}
