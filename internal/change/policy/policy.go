// Package policy evaluates a stage's policy rules (spec.policies) on what
// a promotion's previews found. It is pure: it reads the API objects it is
// given and calls nothing. The rules see names and counts only, never a
// resource's or a configuration's values, so that no rule can carry a
// secret into a status, an event or a log.
package policy

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// CostLimit bounds the work one evaluation of a rule may do (CEL's runtime
// cost units): a promotion's previews list at most 16 × 200 changes, and a
// rule that nests comprehensions over them must not hold the operator.
const CostLimit = 1_000_000

// maxExpressionLength is the API's limit on a rule's expression.
const maxExpressionLength = 4096

// The variables a rule sees, as the API's documentation of PolicyRule
// lists them.
const (
	varChanges   = "changes"
	varCounts    = "counts"
	varStacks    = "stacks"
	varRelease   = "release"
	varPromotion = "promotion"
)

// environment is the CEL environment of rules: the five variables, maps
// keyed by strings, with numbers comparable across int and double and the
// strings extension.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	record := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable(varChanges, cel.ListType(record)),
		cel.Variable(varCounts, cel.MapType(cel.StringType, cel.IntType)),
		cel.Variable(varStacks, cel.ListType(record)),
		cel.Variable(varRelease, record),
		cel.Variable(varPromotion, cel.MapType(cel.StringType, cel.StringType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxExpressionLength),
		cel.ParserRecursionLimit(64),
		ext.Strings(),
	)
})

// Field is the path of a rule's expression in a Stage, for messages:
// spec.policies[name].expression.
func Field(rule string) string {
	return fmt.Sprintf("spec.policies[%s].expression", rule)
}

// Rules are a stage's compiled policy rules, in the stage's order.
type Rules struct {
	rules    []promotionv1alpha1.PolicyRule
	programs []cel.Program
}

// Compile compiles rules. A rule whose expression does not parse, does not
// type-check or cannot yield a bool is an error naming its field: only a
// person who governs the stage can fix it.
func Compile(rules []promotionv1alpha1.PolicyRule) (*Rules, error) {
	env, err := environment()
	if err != nil {
		return nil, fmt.Errorf("the CEL environment of policy rules: %w", err)
	}
	out := &Rules{rules: rules}
	for _, rule := range rules {
		ast, iss := env.Compile(rule.Expression)
		if iss.Err() != nil {
			return nil, fmt.Errorf("%s: %w", Field(rule.Name), iss.Err())
		}
		if t := ast.OutputType(); !t.IsAssignableType(types.BoolType) {
			return nil, fmt.Errorf("%s: yields %s, not a bool", Field(rule.Name), t)
		}
		prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Field(rule.Name), err)
		}
		out.programs = append(out.programs, prg)
	}
	return out, nil
}

// Check reports the first rule that does not compile, or nil.
func Check(rules []promotionv1alpha1.PolicyRule) error {
	_, err := Compile(rules)
	return err
}

// Evaluate runs every rule on facts and returns one result per rule, in
// the stage's order. A rule that fails to evaluate (a missing key, the
// cost limit, a value that is not a bool) is an error naming its field;
// the results are then nil.
func (r *Rules) Evaluate(ctx context.Context, facts Facts) ([]promotionv1alpha1.PolicyResult, error) {
	results := make([]promotionv1alpha1.PolicyResult, 0, len(r.rules))
	for i, rule := range r.rules {
		out, _, err := r.programs[i].ContextEval(ctx, facts.vars)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Field(rule.Name), err)
		}
		fired, ok := out.Value().(bool)
		if !ok {
			return nil, fmt.Errorf("%s: yielded %s, not a bool", Field(rule.Name), out.Type().TypeName())
		}
		results = append(results, result(rule, fired))
	}
	return results, nil
}

// result is what status.policies records of rule.
func result(rule promotionv1alpha1.PolicyRule, fired bool) promotionv1alpha1.PolicyResult {
	res := promotionv1alpha1.PolicyResult{Name: rule.Name, Fired: fired, Action: rule.Action}
	if !fired {
		return res
	}
	res.Message = rule.Message
	if res.Message == "" {
		res.Message = rule.Name
	}
	if rule.Action == promotionv1alpha1.PolicyRequireApproval && rule.Approval != nil {
		res.Required, res.RequireEach = rule.Approval.Required, rule.Approval.RequireEach
		res.From = slices.Clone(rule.Approval.From)
	}
	return res
}

// Refused returns the first fired Refuse result of results, or nil.
func Refused(results []promotionv1alpha1.PolicyResult) *promotionv1alpha1.PolicyResult {
	for i := range results {
		if results[i].Fired && results[i].Action == promotionv1alpha1.PolicyRefuse {
			return &results[i]
		}
	}
	return nil
}

// Approvals returns the fired RequireApproval results of results, in
// order.
func Approvals(results []promotionv1alpha1.PolicyResult) []promotionv1alpha1.PolicyResult {
	var out []promotionv1alpha1.PolicyResult
	for _, res := range results {
		if res.Fired && res.Action == promotionv1alpha1.PolicyRequireApproval {
			out = append(out, res)
		}
	}
	return out
}
