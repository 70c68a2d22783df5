package source

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeArgs feeds arbitrary command lines (arguments separated by
// NUL) to the decoder `stackyard agent init` uses, and checks that it never
// panics and that whatever it accepts survives a round trip through Args
// unchanged: what the operator encodes is what the fetcher decodes.
func FuzzDecodeArgs(f *testing.F) {
	seeds := [][]string{
		{"--git-url=https://example.com/r.git", "--git-commit=" + sha, "--git-dir=infra", "--git-shallow"},
		{"--git-url", "git@example.com:org/r.git", "--git-branch", "main", "--git-ssh-key-file", "/k"},
		{"--git-url=ext::sh -c touch% /tmp/pwned", "--git-branch=-x"},
		{"--git-branch", "--git-url=x"},
		{"--git-shallow=false", "--git-token-file="},
		{"--artifact-url=http://a/b.tar.gz", "--artifact-digest=sha256:00", "--artifact-dir=a=b"},
		{"--project-name=web", "--project-runtime=yaml"},
		{"--github-app-private-key-file=/p", "--github-api-url=https://ghe/api/v3"},
		{"--", "--git-url=x"},
		{"-h"},
		{"--git-url"},
		{""},
	}
	for _, s := range seeds {
		f.Add(strings.Join(s, "\x00"))
	}
	f.Fuzz(func(t *testing.T, line string) {
		req, err := DecodeArgs(strings.Split(line, "\x00"))
		if err != nil {
			return
		}
		args := req.Args()
		again, err := DecodeArgs(args)
		if err != nil {
			t.Fatalf("DecodeArgs(Args()) = %v for %q", err, args)
		}
		if !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip through %q: got %s, want %s", args, describe(again), describe(req))
		}
	})
}
