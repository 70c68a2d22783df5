package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/redact"
)

// outputsProgram has outputs of every shape, secrets at the top, nested in
// an object and in a list, and a plain string that looks like a masked
// secret.
const outputsProgram = `name: outs
runtime: yaml
outputs:
  plain: hello
  number: 42
  fraction: 1.5
  flag: true
  empty: ""
  list: [a, 1, true]
  object:
    a: 1
    b: [x, y]
  secret:
    fn::secret: hidden-value
  nested:
    visible: shown
    hidden:
      fn::secret: nested-hidden
  listWithSecret:
    - open
    - fn::secret: closed
  looksSecret: "[secret] but plain"
`

// plainOutputsProgram has outputs without a secret, one of which only
// looks like a masked secret.
const plainOutputsProgram = `name: plainouts
runtime: yaml
outputs:
  plain: hello
  number: 42
  list: [a, 1, true]
  object:
    a: 1
    b: [x, y]
  looksSecret: "[secret] but plain"
`

// TestOutputsFromExport checks that stateWorkspace reads the same outputs,
// values and secret marks, as the Automation API's LocalWorkspace does
// from its two `pulumi stack output` runs, on real stacks: one command,
// the export, when no output is secret, and the export and one `pulumi
// stack output` when some are; and, after an up whose engine events it
// watched, from those events, with no export.
func TestOutputsFromExport(t *testing.T) {
	cli, err := newCLIRunner("", 0, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, program string
		commands      int
		secret        map[string]bool
	}{
		{"secrets", outputsProgram, 2, map[string]bool{"plain": false, "object": false, "secret": true, "nested": true, "listWithSecret": true}},
		{"no secrets", plainOutputsProgram, 1, map[string]bool{"plain": false, "object": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, backend := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(tc.program), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			env := auto.EnvVars(map[string]string{"PULUMI_BACKEND_URL": "file://" + backend})
			ws, err := auto.NewLocalWorkspace(ctx, auto.WorkDir(dir), auto.Pulumi(cli), env)
			if err != nil {
				t.Fatal(err)
			}
			st, err := auto.UpsertStack(ctx, "dev", ws)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Up(ctx); err != nil {
				t.Fatalf("up: %v", err)
			}
			want, err := ws.StackOutputs(ctx, "dev")
			if err != nil {
				t.Fatal(err)
			}
			// The comparison only means something if the program's
			// secrets are secret, nested ones included.
			for name, secret := range tc.secret {
				if want[name].Secret != secret {
					t.Errorf("`pulumi stack output` marks %s secret=%t; the program has it %t", name, want[name].Secret, secret)
				}
			}

			counted := &countingCommand{PulumiCommand: cli}
			inner, err := auto.NewLocalWorkspace(ctx, auto.WorkDir(dir), auto.Pulumi(counted), env)
			if err != nil {
				t.Fatal(err)
			}
			sw := &stateWorkspace{Workspace: inner}
			got, err := sw.StackOutputs(ctx, "dev")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("outputs read by stateWorkspace:\n%#v\nwant, as `pulumi stack output` gives them:\n%#v", got, want)
			}
			if counted.runs != tc.commands {
				t.Errorf("StackOutputs ran %d commands; want %d", counted.runs, tc.commands)
			}
			if v := sw.view(); v == nil || len(v.pending) != 0 {
				t.Errorf("view after StackOutputs = %+v; want a state without pending operations", v)
			}
			if v := sw.view(); v != nil {
				t.Errorf("a second view = %+v; want none", v)
			}

			// An up whose events the workspace watched: its outputs come
			// from the events, with no export; only the secrets are read
			// with the CLI.
			watched := &countingCommand{PulumiCommand: cli}
			inner, err = auto.NewLocalWorkspace(ctx, auto.WorkDir(dir), auto.Pulumi(watched), env)
			if err != nil {
				t.Fatal(err)
			}
			sw = &stateWorkspace{Workspace: inner}
			st, err = auto.SelectStack(ctx, "dev", sw)
			if err != nil {
				t.Fatal(err)
			}
			fw := newForwarder(discardEvents{}, redact.New(), logr.Discard())
			sw.watched = fw
			watched.args = nil
			res, err := st.Up(ctx, optup.EventStreams(fw.events))
			fw.finish()
			if err != nil {
				t.Fatalf("up: %v", err)
			}
			if !reflect.DeepEqual(res.Outputs, want) {
				t.Errorf("outputs of a watched up:\n%#v\nwant, as `pulumi stack output` gives them:\n%#v", res.Outputs, want)
			}
			wantArgs := []string{"up", "stack history"}
			if tc.commands > 1 {
				wantArgs = []string{"up", "stack output", "stack history"}
			}
			if !slices.Equal(watched.args, wantArgs) {
				t.Errorf("a watched up ran %q; want %q", watched.args, wantArgs)
			}
			if v := sw.view(); v == nil || len(v.pending) != 0 {
				t.Errorf("view after a watched up = %+v; want a state without pending operations", v)
			}
		})
	}
}

// discardEvents is an event stream nobody reads.
type discardEvents struct{}

func (discardEvents) Send(*agentpb.OperationStream) error { return nil }

// countingCommand counts the commands it runs, and records their names.
type countingCommand struct {
	auto.PulumiCommand
	runs int
	args []string
}

func (c *countingCommand) Run(ctx context.Context, workdir string, stdin io.Reader,
	additionalOutput, additionalErrorOutput []io.Writer, additionalEnv []string, args ...string,
) (string, string, int, error) {
	c.runs++
	c.args = append(c.args, commandName(args))
	return c.PulumiCommand.Run(ctx, workdir, stdin, additionalOutput, additionalErrorOutput, additionalEnv, args...)
}
