package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// placeholder is what the help may show as a flag's value: one word
// ("string", "DIR", "time-encoding"), or nothing for a bool.
var placeholder = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*([-_][A-Za-z0-9]+)*)?$`)

// TestFlagPlaceholders: pflag takes the first `backquoted` words of a
// flag's usage as its value's name in the help, so usage that quotes a
// command with backquotes ("built by `make tools`") shows as
// "--bin-dir make tools". Every flag of every command, hidden ones
// included, must show a single word.
func TestFlagPlaceholders(t *testing.T) {
	walk(NewRootCommand(), func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if name, _ := pflag.UnquoteUsage(f); !placeholder.MatchString(name) {
					t.Errorf("%s --%s: the help shows its value as %q; put the value's name first in backquotes (\"`DIR` to ...\") or quote other words with \" instead", c.CommandPath(), f.Name, name)
				}
			})
		}
	})
}

// walk calls fn for c and every command below it.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// TestOperatorHelpNamesEveryKind: `stackyard operator --help` names every
// kind the operator serves (each CRD of config/crd/bases) and its API
// group, so that a new kind is not left out of it.
func TestOperatorHelpNamesEveryKind(t *testing.T) {
	op, _, err := NewRootCommand().Find([]string{"operator"})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no CRDs in config/crd/bases")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		kind, group := crd.Spec.Names.Kind, crd.Spec.Group
		if kind == "" || group == "" {
			t.Fatalf("%s: no kind or group", f)
		}
		if !regexp.MustCompile(`\b` + kind + `s?\b`).MatchString(op.Long) {
			t.Errorf("stackyard operator --help does not name the kind %s (%s): say which controller reconciles it, or which writes or reads it", kind, filepath.Base(f))
		}
		if !strings.Contains(op.Long, group+"/") {
			t.Errorf("stackyard operator --help does not name the API group %s of %s", group, kind)
		}
	}
}
