package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/cli"
)

// referencePath is the committed reference, from this package's directory.
var referencePath = filepath.Join("..", "..", "docs", "cli-reference.md")

// TestReferenceUpToDate fails when docs/cli-reference.md is not what the
// commands of internal/cli say now.
func TestReferenceUpToDate(t *testing.T) {
	committed, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("reading the CLI reference: %v; run `make generate`", err)
	}
	if diff := cmp.Diff(string(committed), string(render(cli.NewRootCommand()))); diff != "" {
		t.Errorf("docs/cli-reference.md is stale: run `make generate` (or `go run ./hack/clidoc -o docs/cli-reference.md`) and commit it.\n-committed +generated:\n%s", diff)
	}
}

// TestReferenceIgnoresEnvironment: the reference reads the same whoever
// generates it, wherever: no home directory, working directory, host name
// or downward-API variable leaks into it.
func TestReferenceIgnoresEnvironment(t *testing.T) {
	before := string(render(cli.NewRootCommand()))
	home := filepath.Join(t.TempDir(), "clidoc-home")
	markers := map[string]string{
		"HOME":          home,
		"KUBECONFIG":    filepath.Join(home, "clidoc-kubeconfig"),
		"POD_NAMESPACE": "clidoc-namespace",
		"POD_NAME":      "clidoc-pod",
		"HOSTNAME":      "clidoc-host",
		"USER":          "clidoc-user",
	}
	for k, v := range markers {
		t.Setenv(k, v)
	}
	after := string(render(cli.NewRootCommand()))
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the reference changes with the environment; render the default as words (cli.DocDefaultAnnotation) or compute it when the command runs:\n%s", diff)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"working directory": wd, "HOME": home, "POD_NAMESPACE": "clidoc-namespace", "HOSTNAME": "clidoc-host", "USER": "clidoc-user"} {
		if strings.Contains(after, v) {
			t.Errorf("the reference holds the %s (%s)", k, v)
		}
	}
}

// TestRender: hidden commands, cobra's help command and the help flag
// stay out; an annotated default shows its words; table cells escape
// Markdown.
func TestRender(t *testing.T) {
	root := &cobra.Command{Use: "tool", Short: "A tool"}
	sub := &cobra.Command{Use: "sub ARG", Short: "Do `it`", Long: "Does it,\n  with *care*.", Example: "  tool sub x", Run: func(*cobra.Command, []string) {}}
	sub.Flags().StringP("mode", "m", "a|b", "how: a|b or <other>")
	sub.Flags().Int("cores", 7, "`N` workers")
	_ = sub.Flags().SetAnnotation("cores", cli.DocDefaultAnnotation, []string{"one per core"})
	sub.Flags().Bool("quiet", false, "say less")
	sub.Flags().String("secret", "", "hidden")
	_ = sub.Flags().MarkHidden("secret")
	root.PersistentFlags().String("config", "", "the config_file")
	hidden := &cobra.Command{Use: "internal", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(sub, hidden)
	root.InitDefaultHelpCmd()
	root.InitDefaultHelpFlag()
	sub.InitDefaultHelpFlag()

	got := string(render(root))
	for _, want := range []string{
		"- [tool](#tool)\n  - [tool sub](#tool-sub)\n",
		"## tool sub\n\nDo `it`\n\n```text\ntool sub ARG [flags]\n```\n",
		"```text\nDoes it,\n  with *care*.\n```\n",
		"Examples:\n\n```sh\n  tool sub x\n```\n",
		"- [tool sub](#tool-sub): Do `it`\n",
		"| `--mode` | `-m` | string | `a\\|b` | how: a\\|b or &lt;other&gt; |\n",
		"| `--cores` |  | N | one per core | N workers |\n",
		"| `--quiet` |  | bool | `false` | say less |\n",
		"Inherited flags:\n\n| Flag | Shorthand | Type | Default | Usage |\n| --- | --- | --- | --- | --- |\n| `--config` |  | string |  | the config\\_file |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the reference lacks %q; it is:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"tool internal", "tool help", "| `--help`", "--secret"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the reference holds %q; it is:\n%s", unwanted, got)
		}
	}
}
