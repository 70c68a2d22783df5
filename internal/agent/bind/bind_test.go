package bind

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := Spec{Dir: "/state/ns/ws", Workspace: "/state/ns/ws/source", TokenFile: "/state/ns/ws/agent.token", Verbose: true,
		Env: []string{"A=1", "B=", "C=x=y", "PULUMI_CONFIG_PASSPHRASE=s3cret\nline", "KEY=\xff\xfe binary"}}
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if out.Dir != in.Dir || out.Workspace != in.Workspace || out.TokenFile != in.TokenFile || out.Verbose != in.Verbose ||
		strings.Join(out.Env, "\x01") != strings.Join(in.Env, "\x01") {
		t.Errorf("Read(Write(%+v)) = %+v", in, out)
	}
}

// env encodes entries as Write does.
func env(entries ...string) string {
	var q []string
	for _, e := range entries {
		q = append(q, `"`+base64.StdEncoding.EncodeToString([]byte(e))+`"`)
	}
	return `"env":[` + strings.Join(q, ",") + `]`
}

func TestReadErrors(t *testing.T) {
	const secret = "s3cret"
	ok := `"dir":"/d","workspace":"/d/src","tokenFile":"/d/t"`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "no spec"},
		{"not json", "x" + secret, "not JSON"},
		{"truncated", `{"dir":"/d","env":["A=` + secret, "ends early"},
		{"wrong type", `{` + ok + `,"env":"A=` + secret + `"}`, "spec.env: want"},
		{"unknown field", `{` + ok + `,"envs":[]}`, `unknown field "envs"`},
		{"trailing", `{` + ok + `}{}`, "data after the spec"},
		{"relative dir", `{"dir":"d","workspace":"/d/src","tokenFile":"/d/t"}`, "spec.dir must be an absolute UTF-8 path"},
		{"no workspace", `{"dir":"/d","tokenFile":"/d/t"}`, "spec.workspace must be an absolute UTF-8 path"},
		{"no token file", `{"dir":"/d","workspace":"/d/src"}`, "spec.tokenFile must be an absolute UTF-8 path"},
		{"env without =", `{` + ok + `,` + env("A=1", secret) + `}`, "spec.env[1] is not NAME=VALUE"},
		{"env without name", `{` + ok + `,` + env("="+secret) + `}`, "spec.env[0] is not NAME=VALUE"},
		{"NUL in a value", `{` + ok + `,` + env("TOKEN="+secret+"\x00") + `}`, "environment variable TOKEN: its value holds a NUL"},
		{"env not base64", `{` + ok + `,"env":["A=` + secret + `"]}`, "spec.env: an entry is not base64"},
		{"too large", `{` + ok + `,"env":["A=` + strings.Repeat("x", MaxSize) + `"]}`, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "s3c") {
				t.Errorf("the error quotes the input: %v", err)
			}
		})
	}
	if _, err := Read(strings.NewReader("")); !errors.Is(err, ErrNoSpec) {
		t.Errorf("Read of nothing = %v, want ErrNoSpec", err)
	}
}

func TestWriteChecks(t *testing.T) {
	err := Write(&bytes.Buffer{}, Spec{Dir: "/d", Workspace: "/d/src", TokenFile: "t"})
	if err == nil || !strings.Contains(err.Error(), "spec.tokenFile") {
		t.Errorf("Write with a relative token file = %v", err)
	}
	var buf bytes.Buffer
	err = Write(&buf, Spec{Dir: "/d", Workspace: "/d/src", TokenFile: "/d/t", Env: []string{"PASS=s3c\x00ret"}})
	if err == nil || !strings.Contains(err.Error(), "environment variable PASS") || strings.Contains(err.Error(), "s3c") {
		t.Errorf("Write with a NUL in a value = %v, want an error naming PASS and not its value", err)
	}
	if buf.Len() != 0 {
		t.Errorf("a rejected spec wrote %d bytes", buf.Len())
	}
}

// TestApply runs its checks in a child process (the test binary again):
// Apply replaces the working directory and environment of the process it
// runs in.
func TestApply(t *testing.T) {
	dir := os.Getenv("BIND_APPLY_DIR")
	if dir == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestApply$", "-test.v")
		cmd.Env = append(os.Environ(), "BIND_APPLY_DIR="+t.TempDir(), "LEFT_OVER=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestApply") {
			t.Fatalf("the child failed (%v):\n%s", err, out)
		}
		return
	}
	s := Spec{Dir: dir, Workspace: dir, TokenFile: dir + "/t", Env: []string{"KEPT=yes", "EMPTY="}}
	if err := s.Apply(); err != nil {
		t.Fatal(err)
	}
	if wd, _ := os.Getwd(); wd != dir {
		t.Errorf("working directory %s, want %s", wd, dir)
	}
	env := os.Environ()
	slices.Sort(env)
	if !slices.Equal(env, []string{"EMPTY=", "KEPT=yes"}) {
		t.Errorf("environment %q, want exactly the spec's", env)
	}
	if err := (Spec{Dir: dir + "/missing"}).Apply(); err == nil || !strings.Contains(err.Error(), "spec.dir") {
		t.Errorf("Apply to a missing directory = %v", err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"dir":"/d","workspace":"/d/src","tokenFile":"/d/t","env":["QT0x"]}`))
	f.Add([]byte(`{"dir":"/d"`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What Read accepts, Write writes and Read reads back the same.
		var buf bytes.Buffer
		if err := Write(&buf, s); err != nil {
			t.Fatalf("Write of an accepted spec: %v", err)
		}
		again, err := Read(&buf)
		if err != nil || again.Dir != s.Dir || again.Workspace != s.Workspace || again.TokenFile != s.TokenFile ||
			again.Verbose != s.Verbose || !slices.Equal(again.Env, s.Env) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, s)
		}
	})
}
