package docscheck

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckers runs each check on small documents against the real CLI
// and CRDs: every kind of drift it is for must be reported, naming what
// was not found, and what is right must pass.
func TestCheckers(t *testing.T) {
	c := checker(t)
	tests := []struct {
		name  string
		check func(Document) (int, []Problem)
		doc   string
		// want are substrings of the problems, one each, in order; none
		// for a document without drift.
		want []string
	}{
		{
			name:  "stackyard: right commands pass",
			check: c.Stackyard,
			doc: "```sh\n$ stackyard promote prod --reason \"x\" --wait\nFOO=1 bin/stackyard approve p -m ok --as=reviewer -y\n" +
				"stackyard pipeline status web -n team-a -ojson\nstackyard operator --runtime=local --help\n```\n" +
				"See `stackyard promote`, `stackyard history [STAGE]`, `stackyard approve … --as reviewer` and `stackyard`.\n",
		},
		{
			name:  "stackyard: a flag that does not exist",
			check: c.Stackyard,
			doc:   "```sh\nstackyard promote prod \\\n  --bogus-flag 3\n```\n",
			want:  []string{`"stackyard promote" has no flag --bogus-flag`},
		},
		{
			name:  "stackyard: a flag with its value attached",
			check: c.Stackyard,
			doc:   "Run `stackyard operator --runtim=local`.\n",
			want:  []string{`"stackyard operator" has no flag --runtim`},
		},
		{
			name:  "stackyard: a shorthand that does not exist",
			check: c.Stackyard,
			doc:   "```console\n$ stackyard approve p -z\n```\n",
			want:  []string{`"stackyard approve" has no flag -z`},
		},
		{
			name:  "stackyard: a subcommand that does not exist",
			check: c.Stackyard,
			doc:   "Run `stackyard pipelines status`, then `stackyard agent serv`, `stackyard pipeline stats`.\n",
			want:  []string{`"stackyard" has no subcommand "pipelines"`, `"stackyard agent" has no subcommand "serv"`, `"stackyard pipeline" has no subcommand "stats"`},
		},
		{
			name:  "stackyard: arguments the command does not take",
			check: c.Stackyard,
			doc:   "```sh\nstackyard review\nstackyard operator now\n```\n",
			want:  []string{`"stackyard review" does not take the arguments []`, `"stackyard operator" does not take the arguments ["now"]`},
		},
		{
			name:  "stackyard: a flag of another subcommand",
			check: c.Stackyard,
			doc:   "```sh\nstackyard review p --reason x\n```\n",
			// Not knowing the flag, the check cannot tell that x is its
			// value: it says so too.
			want: []string{`"stackyard review" has no flag --reason`, `"stackyard review" does not take the arguments ["p" "x"]`},
		},
		{
			name:  "kubectl: right commands pass",
			check: c.Kubectl,
			doc: "```sh\nkubectl -n q get stacks,workspaces,pods -A\nkubectl wait stack/hello --for=jsonpath='{.status.lastUpdate.state}'=succeeded\n" +
				"kubectl get stack s -o jsonpath='{range .status.conditions[*]}{.type}{\"\\n\"}{end}'\n" +
				"kubectl get syapproval --field-selector spec.promotion=p\nkubectl get crd stacks.pulumi.com\n" +
				"kubectl label crd stacks.pulumi.com a=b c- --overwrite\n" +
				"kubectl create namespace x && kubectl apply -f - <<EOF\nkind: Whatever\nEOF\nkubectl auth can-i approve stages/prod\n" +
				"kubectl get stacks -o custom-columns=N:.metadata.name,C:.status.currentUpdate.name\nkubectl explain stacks.spec.prerequisites.name\n" +
				"kubectl -n s rollout status deployment/stackyard\nkubectl logs deploy/stackyard\nkubectl logs pod-0 -c pulumi\n```\n",
		},
		{
			name:  "kubectl: a resource that does not exist",
			check: c.Kubectl,
			doc:   "```sh\nkubectl get stackz,pods\nkubectl describe sypromo/x syrelase/y\nkubectl rollout restart deploymnt/x\nkubectl auth can-i approve stage/x\n```\n",
			want:  []string{`no resource "stackz"`, `no resource "syrelase"`, `no resource "deploymnt"`},
		},
		{
			name:  "kubectl: a field that does not exist, in each place one is named",
			check: c.Kubectl,
			doc: "```sh\nkubectl get stack s -o jsonpath='{.status.lastUpdate.stat}'\n" +
				"kubectl wait systage/qa --for=jsonpath='{.status.currentRelease.nam}'=x\n" +
				"kubectl get stacks -o custom-columns=C:.status.curentUpdate.name\n" +
				"kubectl explain stacks.spec.prerequisite\n" +
				"kubectl get syapproval --field-selector spec.user=bob\n" +
				"kubectl get crd stack.pulumi.com\n" +
				"kubectl create stack x\n" +
				"kubectl get stacks --bogus\n```\n",
			want: []string{
				"-o jsonpath status.lastUpdate.stat: no such field in Stack",
				"--for=jsonpath status.currentRelease.nam: no such field in Stage",
				"-o custom-columns status.curentUpdate.name: no such field in Stack",
				"kubectl explain spec.prerequisite: no such field in Stack",
				"--field-selector spec.user: not a selectable field of Approval",
				`no CRD "stack.pulumi.com"`,
				`kubectl create has no subcommand "stack"`,
				"the kubectl flag --bogus is unknown to docscheck",
			},
		},
		{
			name:  "fields: right paths pass",
			check: c.Fields,
			doc: "`spec.projectRepo`, `status.history[].changes`, `spec.stacks[0].config`, `spec.git.…`, " +
				"`spec.secretsRef[app:x]: the key is also set in spec.configRef`, `spec.ignore` (Flux), `specification`, `status: ok`.\n",
		},
		{
			name:  "fields: paths that do not exist",
			check: c.Fields,
			doc:   "`spec.projectRepository` and `status.lastUpdate.sate`, `spec.refresh: true`, `spec.secretsRef[k]: also in spec.configRefs`.\n",
			want: []string{
				"`spec.projectRepository`: no CRD in config/crd/bases has the field spec.projectRepository",
				"`status.lastUpdate.sate`: no CRD in config/crd/bases has the field status.lastUpdate.sate (status.lastUpdate exists in Stack, without sate below it)",
				"`spec.configRefs`",
			},
		},
		{
			name:  "lone flags: right ones pass",
			check: c.Flags,
			doc:   "`--tool-dirs`, `--shard=<name>`, `--dashboard-*`, `--authorization-mode Node,RBAC`, `--help`; `--not a flag span`.\n",
		},
		{
			name:  "lone flags: ones no command has",
			check: c.Flags,
			doc:   "`--tool-dir` and `--nothing-*` and `--bogus=1`.\n",
			want: []string{
				"`--tool-dir`: no stackyard command has a flag --tool-dir, nor is it in foreignFlags (did you mean --tool-dirs?)",
				"`--nothing-*`: no stackyard command has a flag --nothing-*",
				"`--bogus=1`: no stackyard command has a flag --bogus",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, problems := tt.check(Parse(tt.doc))
			if n == 0 {
				t.Fatal("checked nothing")
			}
			if len(problems) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(tt.want), format(problems))
			}
			for i, w := range tt.want {
				if !strings.Contains(problems[i].Msg, w) {
					t.Errorf("problem %d is %q, want it to say %q", i, problems[i].Msg, w)
				}
			}
		})
	}
}

// format lists problems for a message.
func format(problems []Problem) string {
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "  line %d: %s\n", p.Line, p.Msg)
	}
	return b.String()
}

func TestLinks(t *testing.T) {
	// The repository: README.md, docs/install.md and a few other files.
	files := map[string]bool{
		"README.md": true, "docs": true, "docs/install.md": true, "docs/images/a b.png": true,
		"config": true, "config/x.yaml": true, "cmd/main.go": true, "deploy/README.md": true,
	}
	install := Parse("# Install\n\n## Helm\n\n## Uninstalling\n\n<a id=\"old-name\"></a>\n")
	tests := []struct {
		name   string
		from   string // the linking document, README.md if ""
		target string
		// want is a substring of the one problem, "" for none.
		want string
	}{
		{name: "a document", target: "docs/install.md"},
		{name: "a directory", target: "config/"},
		{name: "a file from a subdirectory", from: "docs/install.md", target: "../config/x.yaml"},
		{name: "percent-encoded, with a query", from: "docs/install.md", target: "images/a%20b.png?raw=true"},
		{name: "from the root", from: "docs/install.md", target: "/cmd/main.go"},
		{name: "a heading's anchor", target: "docs/install.md#uninstalling"},
		{name: "an explicit anchor", target: "docs/install.md#old-name"},
		{name: "an anchor in the document", target: "#intro"},
		{name: "an anchor in the document, by its name", from: "docs/install.md", target: "install.md#helm"},
		{name: "a line of a source file is not checked", target: "cmd/main.go#L10"},
		{name: "an anchor into a document not parsed is not checked", target: "deploy/README.md#anything"},
		{name: "a missing file", target: "docs/gone.md", want: "docs/gone.md does not exist"},
		{name: "a missing file from a subdirectory", from: "docs/install.md", target: "config/x.yaml", want: "docs/config/x.yaml does not exist"},
		{name: "a missing file with an anchor", target: "docs/gone.md#helm", want: "docs/gone.md does not exist"},
		{name: "outside the repository", from: "docs/install.md", target: "../../x.md", want: "../x.md is outside the repository"},
		{name: "a renamed heading", target: "docs/install.md#helmm", want: "docs/install.md has no heading or anchor #helmm (did you mean #helm?)"},
		{name: "a wrong anchor in the document", target: "#nothing-like-it", want: "README.md has no heading or anchor #nothing-like-it"},
		{name: "a bad percent-encoding", target: "docs/%zz.md", want: "bad path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := tt.from
			if from == "" {
				from = "README.md"
			}
			c := &LinkChecker{
				Docs:   map[string]Document{"README.md": Parse("# Readme\n\n## Intro\n"), "docs/install.md": install},
				Exists: func(p string) bool { return files[p] },
			}
			doc := c.Docs[from]
			doc.Links = []Link{{Line: 3, Target: tt.target}}
			c.Docs[from] = doc
			n, problems := c.Links(from)
			if n != 1 {
				t.Fatalf("checked %d links, want 1", n)
			}
			switch {
			case tt.want == "" && len(problems) > 0:
				t.Fatalf("got problems, want none:\n%s", format(problems))
			case tt.want == "":
			case len(problems) != 1:
				t.Fatalf("got %d problems, want 1:\n%s", len(problems), format(problems))
			case !strings.Contains(problems[0].Msg, tt.want) || problems[0].Line != 3:
				t.Errorf("problem is line %d %q, want line 3 saying %q", problems[0].Line, problems[0].Msg, tt.want)
			}
		})
	}
}

func TestLinksSkipsAbsoluteURLs(t *testing.T) {
	c := &LinkChecker{
		Docs:   map[string]Document{"README.md": Parse("[a](https://x/y#z) [b](HTTP://x) [c](mailto:a@b) [d](docs/x.md)\n")},
		Exists: func(string) bool { return true },
	}
	if n, problems := c.Links("README.md"); n != 1 || len(problems) != 0 {
		t.Errorf("checked %d links, with problems:\n%s\nwant 1 link, no problem", n, format(problems))
	}
}

func TestContents(t *testing.T) {
	tests := []struct {
		name        string
		doc         string
		wantChecked int
		want        []string // substrings of the problems, in order
	}{
		{
			name:        "every section listed",
			doc:         "# T\n\n- [A](#a)\n  - [A1](#a1)\n- [B: `b`](#b-b)\n\n## A\n\n### A1\n\n### Not listed\n\n## B: `b`\n",
			wantChecked: 2,
		},
		{
			name:        "sections missing, one of the same name as a listed one",
			doc:         "# T\n\n- [A](#a)\n\n## A\n\n## The missing one\n\n## A\n",
			wantChecked: 3,
			want: []string{
				`the contents list does not list the section "The missing one" (line 7): add [The missing one](#the-missing-one)`,
				`"A" (line 9): add [A](#a-1)`,
			},
		},
		{
			name: "no contents list, nothing checked",
			doc:  "# T\n\n- [A](#a)\n- [Install](install.md)\n\n## A\n\n## B\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, problems := Contents(Parse(tt.doc))
			if n != tt.wantChecked {
				t.Errorf("checked %d sections, want %d", n, tt.wantChecked)
			}
			if len(problems) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(tt.want), format(problems))
			}
			for i, w := range tt.want {
				if !strings.Contains(problems[i].Msg, w) || problems[i].Line != 3 {
					t.Errorf("problem %d is line %d %q, want line 3 saying %q", i, problems[i].Line, problems[i].Msg, w)
				}
			}
		})
	}
}
