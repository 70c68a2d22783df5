package policy

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// promotion is promotion prod-1 of release r1, asked for by rita.
func promotion() *promotionv1alpha1.Promotion {
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "prod-1"}}
	p.Spec = promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r1", RequestedBy: "rita"}
	return p
}

// previews are the previews of promotion(), which found a database
// replaced in Stack db and a page updated in Stack web.
func previews() []promotionv1alpha1.StackPreview {
	return []promotionv1alpha1.StackPreview{{
		Name:    "db",
		Summary: &promotionv1alpha1.ChangeSummary{Replace: 1, Same: 4},
		Changes: []promotionv1alpha1.ResourceChange{{
			URN: "urn:pulumi:prod::db::aws:rds/instance:Instance::main", Type: "aws:rds/instance:Instance", Op: "replace",
			Properties: []string{"engineVersion", "protect"},
		}},
		Source: &promotionv1alpha1.SourceChange{To: "c1", Paths: []string{"infra/db/main.ts", "infra/shared.ts"}},
	}, {
		Name:    "web",
		Summary: &promotionv1alpha1.ChangeSummary{Create: 2, Update: 1},
		Changes: []promotionv1alpha1.ResourceChange{
			{URN: "urn:pulumi:prod::web::stackyardtest:index:File::page", Type: "stackyardtest:index:File", Op: "update", Properties: []string{"content"}},
			{URN: "urn:pulumi:prod::web::aws:s3/bucket:Bucket::a", Type: "aws:s3/bucket:Bucket", Op: "create"},
			{URN: "urn:pulumi:prod::web::aws:s3/bucket:Bucket::b", Type: "aws:s3/bucket:Bucket", Op: "create"},
		},
		Source: &promotionv1alpha1.SourceChange{To: "c1", Paths: []string{"infra/shared.ts", "web/index.ts"}},
	}}
}

// release is r1, tagged v1.2.0.
func release() *promotionv1alpha1.Release {
	return &promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "r1"},
		Spec: promotionv1alpha1.ReleaseSpec{Commit: promotionv1alpha1.ReleaseCommit{
			SHA: strings.Repeat("c1", 20), Tag: "v1.2.0", Author: "Dana <dana@example.com>", Subject: "bump the database",
		}},
	}
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		expression string
		fired      bool
	}{
		{"changes.exists(c, c.op in ['delete', 'replace'] && c.type.matches('^aws:rds/'))", true},
		{"changes.exists(c, c.op == 'delete')", false},
		{"changes.exists(c, 'protect' in c.properties)", true},
		{"changes.exists(c, c.urn == 'urn:pulumi:prod::web::stackyardtest:index:File::page')", true},
		{"changes.filter(c, c.stack == 'web').size() == 3", true},
		{"counts.total > 20", false},
		{"counts.total == 4 && counts.create == 2 && counts.replace == 1 && counts.same == 4", true},
		{"counts.total >= 4.0", true},
		{"stacks.exists(s, s.name == 'db' && s.counts.replace > 0)", true},
		{"stacks.map(s, s.name) == ['db', 'web']", true},
		{"release.paths == ['infra/db/main.ts', 'infra/shared.ts', 'web/index.ts']", true},
		{"release.paths.exists(p, p.startsWith('infra/db/'))", true},
		{"release.name == 'r1' && release.tag == 'v1.2.0' && release.commit.startsWith('c1c1')", true},
		{"release.subject.lowerAscii().contains('database') && release.author.endsWith('<dana@example.com>')", true},
		{"release.rollback", false},
		{"promotion.requestedBy == 'rita' && promotion.name == 'prod-1'", true},
		{"promotion.requestedBy == 'stackyard:auto-promotion'", false},
	}
	facts := FactsOf(promotion(), previews(), release())
	for _, tt := range tests {
		t.Run(tt.expression, func(t *testing.T) {
			rules, err := Compile([]promotionv1alpha1.PolicyRule{{Name: "r", Expression: tt.expression, Action: promotionv1alpha1.PolicyRefuse}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := rules.Evaluate(context.Background(), facts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Fired != tt.fired {
				t.Errorf("Evaluate = %+v, want fired %v", got, tt.fired)
			}
		})
	}
}

func TestResults(t *testing.T) {
	dba := []promotionv1alpha1.Approver{{Group: "dba"}}
	rules := []promotionv1alpha1.PolicyRule{
		{Name: "quiet", Expression: "false", Action: promotionv1alpha1.PolicyRefuse, Message: "never shown"},
		{Name: "db-replace", Expression: "counts.replace > 0", Action: promotionv1alpha1.PolicyRequireApproval,
			Message: "a database is replaced", Approval: &promotionv1alpha1.RuleApproval{Required: 2, From: dba, RequireEach: true}},
		{Name: "unquiet", Expression: "true", Action: promotionv1alpha1.PolicyRefuse},
		{Name: "later", Expression: "true", Action: promotionv1alpha1.PolicyRefuse, Message: "second refusal"},
	}
	compiled, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	got, err := compiled.Evaluate(context.Background(), FactsOf(promotion(), previews(), nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []promotionv1alpha1.PolicyResult{
		{Name: "quiet", Action: promotionv1alpha1.PolicyRefuse},
		{Name: "db-replace", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval, Message: "a database is replaced",
			Required: 2, From: dba, RequireEach: true},
		{Name: "unquiet", Fired: true, Action: promotionv1alpha1.PolicyRefuse, Message: "unquiet"},
		{Name: "later", Fired: true, Action: promotionv1alpha1.PolicyRefuse, Message: "second refusal"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("results\n %+v, want\n %+v", got, want)
	}
	if r := Refused(got); r == nil || r.Name != "unquiet" {
		t.Errorf("Refused = %+v, want unquiet", r)
	}
	if a := Approvals(got); len(a) != 1 || a[0].Name != "db-replace" {
		t.Errorf("Approvals = %+v, want db-replace", a)
	}
	if Refused(got[:2]) != nil || Approvals(got[:1]) != nil {
		t.Error("a rule that did not fire counts")
	}
}

// TestFactsWithoutPreviews: a promotion with nothing previewed yet, or
// Stacks without source or summary, still gives every variable its shape.
func TestFactsWithoutPreviews(t *testing.T) {
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p.Spec.Release, p.Spec.Rollback = "r0", true
	pvs := []promotionv1alpha1.StackPreview{{Name: "web"}}
	compiled, err := Compile([]promotionv1alpha1.PolicyRule{{Name: "shape", Action: promotionv1alpha1.PolicyRefuse, Expression: `
		changes.size() == 0 && counts.total == 0 && stacks[0].counts.same == 0 &&
		release.paths.size() == 0 && release.rollback && release.name == 'r0' && release.tag == '' && promotion.requestedBy == ''`}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := compiled.Evaluate(context.Background(), FactsOf(p, pvs, nil))
	if err != nil || !got[0].Fired {
		t.Errorf("Evaluate = %+v, %v; want fired", got, err)
	}
}

func TestErrors(t *testing.T) {
	many := previews()
	for i := range 3000 {
		many[1].Changes = append(many[1].Changes, promotionv1alpha1.ResourceChange{
			URN: fmt.Sprintf("urn:pulumi:prod::web::t::r%d", i), Type: "t", Op: "create",
		})
	}
	tests := []struct {
		name, expression string
		previews         []promotionv1alpha1.StackPreview
		compile          string // the error of Compile
		evaluate         string // the error of Evaluate
	}{
		{name: "syntax", expression: "changes.exists(c, ", compile: "spec.policies[r].expression: ERROR"},
		{name: "unknown variable", expression: "secrets.size() > 0", compile: "undeclared reference to 'secrets'"},
		{name: "not a bool", expression: "counts.total", compile: "spec.policies[r].expression: yields int, not a bool"},
		{name: "a dyn that is not a bool", expression: "release.name", evaluate: "spec.policies[r].expression: yielded string, not a bool"},
		{name: "a missing key", expression: "changes.exists(c, c.value == 'x')", evaluate: "spec.policies[r].expression: no such key: value"},
		{name: "the cost limit", previews: many, expression: "changes.all(a, changes.all(b, a.urn != b.urn || a == b))",
			evaluate: "spec.policies[r].expression: operation cancelled: actual cost limit exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compiled, err := Compile([]promotionv1alpha1.PolicyRule{
				{Name: "ok", Expression: "true", Action: promotionv1alpha1.PolicyRefuse},
				{Name: "r", Expression: tt.expression, Action: promotionv1alpha1.PolicyRefuse},
			})
			if tt.compile != "" {
				if err == nil || !strings.Contains(err.Error(), tt.compile) {
					t.Fatalf("Compile error %v, want %q", err, tt.compile)
				}
				if Check([]promotionv1alpha1.PolicyRule{{Name: "r", Expression: tt.expression}}) == nil {
					t.Error("Check accepts it")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pvs := tt.previews
			if pvs == nil {
				pvs = previews()
			}
			results, err := compiled.Evaluate(context.Background(), FactsOf(promotion(), pvs, release()))
			if err == nil || !strings.Contains(err.Error(), tt.evaluate) || results != nil {
				t.Errorf("Evaluate = %+v, %v; want the error %q", results, err, tt.evaluate)
			}
		})
	}
}

// TestDocumentedRules compiles every rule docs/change-management.md shows
// in a YAML block with a policies list, and runs it on the example
// promotion.
func TestDocumentedRules(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/change-management.md")
	if err != nil {
		t.Fatal(err)
	}
	var rules []promotionv1alpha1.PolicyRule
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(block[1], "policies:") {
			continue
		}
		// A whole Stage, or a fragment of its spec.
		var doc struct {
			Spec struct {
				Policies []promotionv1alpha1.PolicyRule `json:"policies"`
			} `json:"spec"`
			Policies []promotionv1alpha1.PolicyRule `json:"policies"`
		}
		if err := yaml.Unmarshal([]byte(block[1]), &doc); err != nil {
			t.Fatalf("a documented policy does not parse: %v\n%s", err, block[1])
		}
		rules = append(rules, doc.Policies...)
		rules = append(rules, doc.Spec.Policies...)
	}
	if len(rules) < 4 {
		t.Fatalf("found %d documented rules, want at least 4", len(rules))
	}
	for _, rule := range rules {
		if (rule.Action == promotionv1alpha1.PolicyRequireApproval) != (rule.Approval != nil) {
			t.Errorf("rule %s: approval goes with RequireApproval, and only with it", rule.Name)
		}
	}
	compiled, err := Compile(rules)
	if err != nil {
		t.Fatalf("a documented rule does not compile: %v", err)
	}
	if _, err := compiled.Evaluate(context.Background(), FactsOf(promotion(), previews(), release())); err != nil {
		t.Fatalf("a documented rule does not evaluate: %v", err)
	}
}

// FuzzRules compiles and evaluates any expression on the example
// promotion: nothing may panic, and the cost limit keeps each evaluation
// bounded.
func FuzzRules(f *testing.F) {
	for _, seed := range []string{
		"changes.exists(c, c.op == 'delete')",
		"counts.total > 20",
		"stacks.all(s, s.counts.total < 3)",
		"release.paths.exists(p, p.matches('^infra/'))",
		"changes.all(a, changes.exists(b, a.urn == b.urn))",
		"promotion.requestedBy.split(':')[0] == 'system'",
		"release.name",
		"changes[99].op == 'x'",
		"int(release.commit) > 0",
	} {
		f.Add(seed)
	}
	facts := FactsOf(promotion(), previews(), release())
	f.Fuzz(func(t *testing.T, expression string) {
		rules, err := Compile([]promotionv1alpha1.PolicyRule{{Name: "fuzz", Expression: expression, Action: promotionv1alpha1.PolicyRefuse}})
		if err != nil {
			if !strings.Contains(err.Error(), Field("fuzz")) {
				t.Fatalf("Compile(%q) error %q does not name the field", expression, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		results, err := rules.Evaluate(ctx, facts)
		switch {
		case err != nil && !strings.Contains(err.Error(), Field("fuzz")):
			t.Fatalf("Evaluate(%q) error %q does not name the field", expression, err)
		case err == nil && len(results) != 1:
			t.Fatalf("Evaluate(%q) = %+v", expression, results)
		}
	})
}
