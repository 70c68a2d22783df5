package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// ProjectSpec describes the minimal Pulumi project written by
// WriteProject.
type ProjectSpec struct {
	// Name is the Pulumi project name; it must match the stack's project
	// so Pulumi finds the stack's state.
	Name string
	// Runtime is the project runtime, e.g. "nodejs", "python", "go" or
	// "yaml". Nothing is run from it when only destroying.
	Runtime string
}

// projectNamePattern follows Pulumi's own rule for project names:
// alphanumerics, hyphens, underscores and periods, at most 100 characters.
var projectNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// runtimePattern accepts runtime names such as "nodejs" or "yaml".
var runtimePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// WriteProject places a directory holding only a Pulumi.yaml with the given
// name and runtime at target. It lets a stack be destroyed after its source
// is gone: Pulumi needs a project, not the program, to delete resources it
// has state for. Like the fetches, it replaces target only on success.
func WriteProject(ctx context.Context, target string, spec ProjectSpec) (*Result, error) {
	if !projectNamePattern.MatchString(spec.Name) || spec.Name == "." || spec.Name == ".." {
		return nil, newError(ReasonInvalidSpec, FieldProjectName, nil,
			"%q: a Pulumi project name may only contain letters, digits, hyphens, underscores and periods (at most 100)", spec.Name)
	}
	if !runtimePattern.MatchString(spec.Runtime) {
		return nil, newError(ReasonInvalidSpec, FieldProjectRuntime, nil, "%q: not a valid Pulumi runtime name", spec.Runtime)
	}
	if err := ctx.Err(); err != nil {
		return nil, newError(ReasonUnreachable, FieldNone, err, "writing project: %v", err)
	}
	// Both values are quoted: a name such as "true" or "1.0" would
	// otherwise be read back as a boolean or a number.
	content := fmt.Sprintf("name: %q\nruntime: %q\n", spec.Name, spec.Runtime)
	err := place(target, func(dir string) error {
		if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(content), 0o644); err != nil {
			return newError(ReasonInternal, FieldNone, err, "writing Pulumi.yaml: %v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Result{Dir: programPath(target, ".")}, nil
}
