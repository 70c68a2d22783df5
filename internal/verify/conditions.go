package verify

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

// Phases of one measurement, as Argo Rollouts names them (Failed is a
// check's phase too).
const (
	// Successful: the success condition held (or there was none to fail).
	Successful = "Successful"
	// Failed: the failure condition held, or the success condition did
	// not; for a check, more than failureLimit measurements failed.
	Failed = "Failed"
	// Error: the measurement could not be taken or judged.
	Error = "Error"
)

// CostLimit bounds the work one evaluation of a condition may do (CEL's
// runtime cost units), so that a condition over a large answer, or a
// comprehension nested in another, cannot hold the operator.
const CostLimit = 1_000_000

// maxConditionLength is the API's limit on a condition's text.
const maxConditionLength = 4096

// environment is the CEL environment of conditions: one variable,
// `result`, of any type, with numbers comparable across int and double
// (JSON does not tell 3 from 3.0) and the strings extension.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("result", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxConditionLength),
		cel.ParserRecursionLimit(64),
		ext.Strings(),
	)
})

// Conditions are a check's compiled successCondition and failureCondition;
// either may be missing. The zero value has neither and judges every
// measurement Successful.
type Conditions struct {
	success, failure cel.Program
}

// Compile compiles success and failure (empty: not set). An expression
// that does not parse, does not type-check, or cannot yield a bool is an
// error naming the field, for the user to fix: it fails the check at once
// instead of failing every measurement.
func Compile(success, failure string) (*Conditions, error) {
	c := &Conditions{}
	var err error
	if c.success, err = compile("successCondition", success); err != nil {
		return nil, err
	}
	if c.failure, err = compile("failureCondition", failure); err != nil {
		return nil, err
	}
	return c, nil
}

// compile compiles one condition, or returns nil for an empty one.
func compile(field, src string) (cel.Program, error) {
	if src == "" {
		return nil, nil
	}
	env, err := environment()
	if err != nil {
		return nil, fmt.Errorf("the CEL environment: %w", err)
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s %q: %w", field, src, iss.Err())
	}
	if t := ast.OutputType(); !t.IsAssignableType(types.BoolType) {
		return nil, fmt.Errorf("%s %q: yields %s, not a bool", field, src, t)
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", field, src, err)
	}
	return prg, nil
}

// Evaluate judges one measured value: Successful, Failed, or Error with
// why (a condition that failed to evaluate, e.g. a missing field, or that
// yielded no bool). The message says which condition decided a Failed.
func (c *Conditions) Evaluate(ctx context.Context, result any) (phase, message string) {
	var success, failure bool
	if c.success != nil {
		ok, err := eval(ctx, c.success, result)
		if err != nil {
			return Error, "successCondition: " + err.Error()
		}
		success = ok
	}
	if c.failure != nil {
		ok, err := eval(ctx, c.failure, result)
		if err != nil {
			return Error, "failureCondition: " + err.Error()
		}
		failure = ok
	}
	switch {
	case failure:
		return Failed, "failureCondition is true"
	case c.success != nil && !success:
		return Failed, "successCondition is false"
	default:
		return Successful, ""
	}
}

// eval runs prg on result and returns its bool.
func eval(ctx context.Context, prg cel.Program, result any) (bool, error) {
	out, _, err := prg.ContextEval(ctx, map[string]any{"result": result})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("yielded %s, not a bool", out.Type().TypeName())
	}
	return b, nil
}
