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
