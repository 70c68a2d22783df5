package docscheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCommands(t *testing.T) {
	tests := []struct {
		line string
		want [][]string
	}{
		{"stackyard review p --patch", [][]string{{"stackyard", "review", "p", "--patch"}}},
		{"FOO=bar KUBECONFIG=/x stackyard history", [][]string{{"stackyard", "history"}}},
		{"make dev && stackyard dev notify; echo ok | grep o",
			[][]string{{"make", "dev"}, {"stackyard", "dev", "notify"}, {"echo", "ok"}, {"grep", "o"}}},
		{"stackyard promote prod $R1 --wait || echo \"refused\"",
			[][]string{{"stackyard", "promote", "prod", "$R1", "--wait"}, {"echo", "refused"}}},
		{`stackyard approve p -m "it's fine" --reason='a b'`,
			[][]string{{"stackyard", "approve", "p", "-m", "it's fine", "--reason=a b"}}},
		{"stackyard history -o json > out.json 2>&1 # a comment --bogus",
			[][]string{{"stackyard", "history", "-o", "json"}}},
		{"R=$(kubectl get stack s -o jsonpath='{.status.x}')",
			[][]string{{"kubectl", "get", "stack", "s", "-o", "jsonpath={.status.x}"}}},
		{`kubectl annotate stack s x="$(date +%s)" --overwrite`,
			[][]string{{"date", "+%s"}, {"kubectl", "annotate", "stack", "s", "x=$(…)", "--overwrite"}}},
		{"for c in a b; do kubectl label crd \"$c\" x=y; done",
			[][]string{{"for", "c", "in", "a", "b"}, {"kubectl", "label", "crd", "$c", "x=y"}, {"done"}}},
		{"kubectl apply -f - <<EOF", [][]string{{"kubectl", "apply", "-f", "-"}}},
		{"stackyard promote <stage> [RELEASE]", [][]string{{"stackyard", "promote", "<stage>", "[RELEASE]"}}},
		{"sudo env X=1 stackyard dev", [][]string{{"stackyard", "dev"}}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Commands(tt.line)); diff != "" {
				t.Errorf("Commands(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestRuns(t *testing.T) {
	tests := []struct {
		word string
		want bool
	}{
		{"stackyard", true},
		{"bin/stackyard", true},
		{"/usr/local/bin/stackyard", true},
		{"./bin/stackyard", true},
		{"stackyard-agent", false},
		{"deploy/helm/stackyard", false},
		{"stackyard.dev/shard", false},
	}
	for _, tt := range tests {
		if got := Runs([]string{tt.word, "x"}, "stackyard"); got != tt.want {
			t.Errorf("Runs(%q) = %v, want %v", tt.word, got, tt.want)
		}
	}
}
