package docscheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		wantCmds  []Snippet
		wantSpans []Snippet
	}{
		{
			name: "a prompt is stripped and continuation lines are joined",
			src:  "Intro\n\n```sh\n$ stackyard promote prod \\\n    --reason \"x\" \\\n    --wait\nstackyard history\n```\n",
			wantCmds: []Snippet{
				{Line: 4, Text: `stackyard promote prod --reason "x" --wait`, Code: true},
				{Line: 7, Text: "stackyard history", Code: true},
			},
		},
		{
			name: "a console block's output is not a command",
			src:  "```console\n$ stackyard review p\nstackyard is running\n$ stackyard approve p\n```\n",
			wantCmds: []Snippet{
				{Line: 2, Text: "stackyard review p", Code: true},
				{Line: 4, Text: "stackyard approve p", Code: true},
			},
		},
		{
			name: "a heredoc's body is skipped",
			src:  "```bash\nkubectl apply -f - <<'EOF'\nstackyard: not a command\nEOF\nkubectl get stacks\n```\n",
			wantCmds: []Snippet{
				{Line: 2, Text: "kubectl apply -f - <<'EOF'", Code: true},
				{Line: 5, Text: "kubectl get stacks", Code: true},
			},
		},
		{
			name: "a here-string is no heredoc",
			src:  "```sh\ngrep x <<< \"a\"\nstackyard history\n```\n",
			wantCmds: []Snippet{
				{Line: 2, Text: `grep x <<< "a"`, Code: true},
				{Line: 3, Text: "stackyard history", Code: true},
			},
		},
		{
			name:     "blocks in other languages are not read",
			src:      "```yaml\nstackyard: x\n```\n~~~go\nstackyard()\n~~~\n",
			wantCmds: nil,
		},
		{
			name: "an indented fence inside a list item",
			src:  "- step\n\n  ```sh\n  stackyard dev\n  ```\n",
			wantCmds: []Snippet{
				{Line: 4, Text: "stackyard dev", Code: true},
			},
		},
		{
			name: "inline spans, across a line break, with double backticks",
			src:  "Run `stackyard\npromote STAGE` or ``a `b` c``.\n\nNot `across\n\nparagraphs.",
			wantSpans: []Snippet{
				{Line: 1, Text: "stackyard promote STAGE"},
				{Line: 2, Text: "a `b` c"},
			},
		},
		{
			name: "spans do not cross table rows; code in a fence is no span",
			src:  "| `a | b\n| c` |\n```\n`x`\n```\n\\`not\\` `y`\n",
			wantCmds: []Snippet{
				{Line: 4, Text: "`x`", Code: true},
			},
			wantSpans: []Snippet{
				{Line: 6, Text: "y"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.src)
			if diff := cmp.Diff(tt.wantCmds, got.Commands); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSpans, got.Spans); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ text, want string }{
		{"Where to look first", "where-to-look-first"},
		{"Promotions pin `spec.commit`", "promotions-pin-speccommit"},
		{"Program artifacts: HTTP 404", "program-artifacts-http-404"},
		{"stackyard's own groups (v1alpha1)", "stackyards-own-groups-v1alpha1"},
		{"Change management: a dev → qa → prod pipeline", "change-management-a-dev--qa--prod-pipeline"},
		{"C# and C++ & Go!", "c-and-c--go"},
		{"snake_case and kebab-case", "snake_case-and-kebab-case"},
		{"Results (2026-11-25)", "results-2026-11-25"},
		{"Über Größe", "über-größe"},
		{"日本語 の 見出し", "日本語-の-見出し"},
		{"Ship it 🚀", "ship-it-"},
		{"  Two  spaces ", "two--spaces"},
	}
	for _, tt := range tests {
		if got := Slug(tt.text); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestParseHeadingsAndAnchors(t *testing.T) {
	tests := []struct {
		name        string
		src         string
		wantHeads   []Heading
		wantAnchors []string
	}{
		{
			name: "levels, and a repeated slug numbered as GitHub does",
			src:  "# Title\n\n## Intro\n\n### Intro\n\n## Intro-1\n\n###### Six\n",
			wantHeads: []Heading{
				{Line: 1, Level: 1, Text: "Title", Slug: "title"},
				{Line: 3, Level: 2, Text: "Intro", Slug: "intro"},
				{Line: 5, Level: 3, Text: "Intro", Slug: "intro-1"},
				{Line: 7, Level: 2, Text: "Intro-1", Slug: "intro-1-1"},
				{Line: 9, Level: 6, Text: "Six", Slug: "six"},
			},
		},
		{
			name: "the slug is of the text shown: code, a link's text, no image or tag, no closing #s",
			src:  "## `code` [link](x.md) ![img](i.png) <span>tag</span> ##\n## C#\n## \\*Escaped\\*\n",
			wantHeads: []Heading{
				{Line: 1, Level: 2, Text: "`code` [link](x.md) ![img](i.png) <span>tag</span>", Slug: "code-link--tag"},
				{Line: 2, Level: 2, Text: "C#", Slug: "c"},
				{Line: 3, Level: 2, Text: `\*Escaped\*`, Slug: "escaped"},
			},
		},
		{
			name: "no heading in a code block, without a space or indented four",
			src:  "```sh\n# a comment\n```\n\n#hashtag\n\n    # code\n\n####### seven\n",
		},
		{
			name:        "explicit anchors, not in code",
			src:         "<a id=\"update-v1\"></a>text <A NAME='old'>x</A>\n\nNot `<a id=\"nope\">`.\n\n```html\n<a id=\"fenced\"></a>\n```\n",
			wantAnchors: []string{"update-v1", "old"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.src)
			if diff := cmp.Diff(tt.wantHeads, got.Headings); diff != "" {
				t.Errorf("headings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnchors, got.Anchors); diff != "" {
				t.Errorf("anchors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseLinks(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []Link
	}{
		{
			name: "links and images, with a title or code in the text",
			src:  "See [the guide](docs/install.md) and [`stackyard`](cli-reference.md#stackyard \"The CLI\").\n![shot](images/a.png 'A shot')\n",
			want: []Link{
				{Line: 1, Target: "docs/install.md"},
				{Line: 1, Target: "cli-reference.md#stackyard"},
				{Line: 2, Target: "images/a.png", Image: true},
			},
		},
		{
			name: "a link across a line break, a badge, angle brackets, parentheses",
			src:  "A [link across\nlines](a.md#x), a badge [![b](https://x/b.svg)](https://x),\n[angle](<with space.md>) and [parens](f(1).md).\n",
			want: []Link{
				{Line: 1, Target: "a.md#x"},
				{Line: 2, Target: "https://x"},
				{Line: 2, Target: "https://x/b.svg", Image: true},
				{Line: 3, Target: "with space.md"},
				{Line: 3, Target: "f(1).md"},
			},
		},
		{
			name: "none in code spans, fenced blocks or escaped, none without a target",
			src:  "Not `[code](span.md)`, not ``a [b](c.md) d``, not \\[escaped](e.md), [no target] here.\n\n```md\n[fenced](block.md)\n```\n",
		},
		{
			name: "in a table row and a heading",
			src:  "## See [x](x.md)\n\n| [cell](table.md) | `[x](y)` |\n",
			want: []Link{
				{Line: 1, Target: "x.md"},
				{Line: 3, Target: "table.md"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Parse(tt.src).Links); diff != "" {
				t.Errorf("links (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseContents(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // the targets of the contents list's links
	}{
		{
			name: "a list of anchors before the first section",
			src:  "# T\n\nIntro, see [install](install.md).\n\n- [A](#a)\n- [B](#b)\n\n## A\n\n## B\n",
			want: []string{"#a", "#b"},
		},
		{
			name: "items over several lines, with text and several links",
			src:  "# T\n\nContents:\n\n- [A](#a): the first,\n  and more\n- B: [b1](#b1) ·\n  [b2](#b2)\n\n---\n\n## A\n",
			want: []string{"#a", "#b1", "#b2"},
		},
		{
			name: "a list with a link elsewhere is no contents list",
			src:  "# T\n\n- [A](#a)\n- [Install](install.md)\n\n## A\n",
		},
		{
			name: "a list with an item without a link is no contents list",
			src:  "# T\n\n- [A](#a)\n- plain\n\n## A\n",
		},
		{
			name: "the first list of anchors is taken, not a list of something else",
			src:  "# T\n\n- one\n\ntext\n\n- [A](#a)\n\ntext\n\n- [B](#b)\n\n## A\n\n## B\n",
			want: []string{"#a"},
		},
		{
			name: "a list after the first section is none",
			src:  "# T\n\n## A\n\n- [A](#a)\n- [B](#b)\n\n## B\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range Parse(tt.src).Contents {
				got = append(got, l.Target)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("contents (-want +got):\n%s", diff)
			}
		})
	}
}
