package server

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/proc"
	"github.com/stackyard/stackyard/internal/redact"
)

// lockedMessage is the CLI's message for a locked stack, as v3.170.0 to
// v3.274.1 print it for a file:// backend.
const lockedMessage = "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.\n" +
	"  file:///tmp/state/.pulumi/locks/organization/proj/dev/cafdf100.json?no_tmp_dir=true: created by root@vm-1 (pid 16151) at 2026-11-22T15:41:15Z\n"

func TestParseLocks(t *testing.T) {
	locks := parseLocks("failed to run update: exit status 255\ncode: 255\nstdout: \nstderr: " + lockedMessage)
	if len(locks) != 1 {
		t.Fatalf("parseLocks = %v; want one lock", locks)
	}
	l := locks[0]
	want := time.Date(2026, 11, 22, 15, 41, 15, 0, time.UTC)
	if l.pid != 16151 || l.username != "root" || l.hostname != "vm-1" || !l.timestamp.Equal(want) ||
		!strings.HasSuffix(l.url, "cafdf100.json?no_tmp_dir=true") {
		t.Errorf("parseLocks = %+v", l)
	}
	if got := parseLocks("error: something else"); len(got) != 0 {
		t.Errorf("parseLocks of another error = %v", got)
	}
}

// TestParseLocksReadsLockFile checks that for a file:// backend the lock
// file's full-precision timestamp replaces the message's.
func TestParseLocksReadsLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.json")
	if err := os.WriteFile(path, []byte(`{"pid":42,"username":"u","hostname":"h","timestamp":"2026-11-22T15:41:15.5Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := "  file://" + path + "?no_tmp_dir=true: created by u@h (pid 42) at 2026-11-22T15:41:15Z"
	locks := parseLocks(msg)
	if len(locks) != 1 || locks[0].timestamp.Nanosecond() != 500_000_000 {
		t.Errorf("parseLocks = %+v; want the file's timestamp", locks)
	}
}

func TestHolderGone(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	started, ok := proc.StartTime(self)
	if !ok {
		t.Fatal("cannot read this process's start time")
	}
	for _, tc := range []struct {
		name string
		lock stackLock
		gone bool
		why  string
	}{
		{"another host", stackLock{pid: exited.Process.Pid, hostname: host + "-other", timestamp: time.Now()}, false, "not this one"},
		{"exited process", stackLock{pid: exited.Process.Pid, hostname: host, timestamp: time.Now()}, true, "not running"},
		{"live holder", stackLock{pid: self, hostname: host, timestamp: started.Add(time.Second)}, false, "is running"},
		{"pid reused", stackLock{pid: self, hostname: host, timestamp: started.Add(-time.Hour)}, true, "started after"},
		{"live holder, no time", stackLock{pid: self, hostname: host}, false, "is running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gone, why := holderGone(tc.lock, host)
			if gone != tc.gone || !strings.Contains(why, tc.why) {
				t.Errorf("holderGone = %v, %q; want %v, …%q…", gone, why, tc.gone, tc.why)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	autoErr := func(stderr string) error {
		return errors.New("failed to run update: exit status 255\ncode: 255\nstdout: Updating (dev):\n\nstderr: " + stderr + "\n")
	}
	for _, tc := range []struct {
		name  string
		err   error
		diags []diagnostic
		want  agenterr.Reason
	}{
		{"lock", autoErr(lockedMessage), nil, agenterr.StackLocked},
		{"conflict", autoErr("error: [409] Conflict: Another update is currently in progress."), nil, agenterr.UpdateConflict},
		{"token", autoErr("error: invalid access token"), nil, agenterr.InvalidAccessToken},
		{"no stack", autoErr("error: no stack named 'dev' found"), nil, agenterr.StackNotFound},
		{"bad key", autoErr("error: invalid configuration key: could not parse a:b:c as a configuration key"), nil, agenterr.InvalidConfig},
		{"missing config", autoErr("error: validating stack config: Stack 'dev' is missing configuration value 'x'"), nil, agenterr.InvalidConfig},
		{"no changes expected", autoErr("error: no changes were expected but changes were proposed"), nil, agenterr.UnexpectedChanges},
		{"no changes expected, Pulumi 3.274", autoErr("error: no changes were expected for refresh but changes were proposed"), nil, agenterr.UnexpectedChanges},
		{"plugin", autoErr(""), []diagnostic{{message: "no resource plugin 'pulumi-resource-x' found in the workspace", stderr: true}}, agenterr.MissingPlugin},
		{"resource", autoErr(""), []diagnostic{
			{urn: "urn:pulumi:dev::p::t:index:Fail::f", message: "boom"},
			{message: "update failed"},
		}, agenterr.ResourceFailed},
		{"program", autoErr(""), []diagnostic{
			{urn: "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", message: `resource or variable named "x" could not be found`},
		}, agenterr.ProgramError},
		{"program stderr", autoErr(""), []diagnostic{{message: "Error: type mismatch", stderr: true}}, agenterr.ProgramError},
		{"unknown", autoErr("error: something odd"), []diagnostic{{message: "warning: noise", stderr: true}}, agenterr.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head, stdout, stderr := splitAutoError(tc.err.Error())
			if got := classify(tc.err, head+stdout+stderr, tc.diags); got != tc.want {
				t.Errorf("classify = %s; want %s", got, tc.want)
			}
		})
	}
}

func TestConciseMessage(t *testing.T) {
	diags := []diagnostic{
		{message: "warning: using a plugin from $PATH", stderr: true},
		{urn: "urn:pulumi:dev::p::t:index:Fail::f", message: "boom\n"},
		{message: "update failed\n"},
	}
	if got := conciseMessage("failed to run update", "", diags); got != "t:index:Fail f: boom" {
		t.Errorf("conciseMessage = %q", got)
	}
	if got := conciseMessage("failed", "warning: x\nerror: \x1b[31mbad\x1b[0m thing\n", nil); got != "error: bad thing" {
		t.Errorf("conciseMessage from stderr = %q", got)
	}
}

func TestSecretLeaves(t *testing.T) {
	leaves, err := secretLeaves(configEntry{key: "p:db", secret: true, value: `{"user":"u","hosts":["h1"],"port":5432,"weird.key":"w","none":null}`})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range leaves {
		if !l.secret || !l.path {
			t.Errorf("leaf %+v is not a secret path", l)
		}
		got[l.key] = l.value
	}
	want := map[string]string{"p:db.user": "u", "p:db.hosts[0]": "h1", "p:db.port": "5432", `p:db["weird.key"]`: "w"}
	if len(got) != len(want) {
		t.Errorf("leaves = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("leaf %s = %q; want %q (all: %v)", k, got[k], v, got)
		}
	}
	if s, err := skeletonOf(`{"a":[1,{"b":true}]}`); err != nil || s != `{"a":["",{"b":""}]}` {
		t.Errorf("skeletonOf = %s, %v", s, err)
	}
}

// TestRunnerKillsStubbornCLI checks the escalation: a CLI that ignores
// SIGINT is killed, with the processes it started, once the grace period
// is over.
func TestRunnerKillsStubbornCLI(t *testing.T) {
	dir := t.TempDir()
	childPidFile := filepath.Join(dir, "child.pid")
	fake := filepath.Join(dir, "pulumi")
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = version ]; then echo v3.170.0; exit 0; fi\n" +
		"trap '' INT\n" +
		"sleep 3600 &\n" +
		"echo $! > " + childPidFile + "\n" +
		"wait\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := newCLIRunner(fake, 300*time.Millisecond, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if r.Version().String() != "3.170.0" {
		t.Errorf("version = %s", r.Version())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(childPidFile); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	// The CLI ignores SIGINT and its child sleeps for an hour: Run can only
	// return because the grace period ran out and the tree was killed.
	_, _, _, err = r.Run(ctx, dir, nil, nil, nil, nil, "up")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run error = %v; want context.Canceled", err)
	}
	b, err := os.ReadFile(childPidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(time.Minute)
	for proc.Alive(child) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if proc.Alive(child) {
		t.Errorf("the CLI's child %d survived the kill", child)
	}
}

// TestSecretEnvMasked: values of the environment variables the runtime
// names as read from Secrets are masked from the start.
func TestSecretEnvMasked(t *testing.T) {
	t.Setenv(redact.SecretEnvVar, "MY_TOKEN")
	t.Setenv("MY_TOKEN", "tok-3f9a77")
	t.Setenv("PLAIN", "plain-value")
	s, err := New(Options{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.secrets.Redact("token tok-3f9a77, plain-value"); got != "token "+redact.Placeholder+", plain-value" {
		t.Errorf("redacted %q", got)
	}
}

func TestFileURLDir(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, want string }{
		{"file:///var/state", "/var/state"},
		{"file:///var/state/?no_tmp_dir=true", "/var/state"},
		{"file://state", "/work/project/state"},
		{"file://../shared%20state", "/work/shared state"},
		{"file://~", home},
		{"file://~/.pulumi-state", filepath.Join(home, ".pulumi-state")},
		{"s3://bucket/prefix", ""},
		{"https://api.pulumi.com", ""},
		{"", ""},
	} {
		if got := fileURLDir(tc.url, "/work/project"); got != tc.want {
			t.Errorf("fileURLDir(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestRemoveDamagedSidecars(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		".pulumi/stacks/p/dev.json":                      `{"version":3}`,
		".pulumi/stacks/p/dev.json.attrs":                ``,
		".pulumi/stacks/p/prod.json":                     `{"version":3}`,
		".pulumi/stacks/p/prod.json.attrs":               `{"user.cache_control":"","md5":"AAAA"}`,
		".pulumi/history/p/dev/dev-1.history.json":       `{}`,
		".pulumi/history/p/dev/dev-1.history.json.attrs": `{"md5":`,
		".pulumi/locks/organization/p/dev/a.json":        `{}`,
		".pulumi/locks/organization/p/dev/a.json.attrs":  `null`,
		".pulumi/locks/organization/p/dev/b.json.attrs":  ``,
		".pulumi/meta.yaml":                              `version: 1`,
		".pulumi/meta.yaml.attrs":                        `{}`,
		"elsewhere":                                      `x`,
		"elsewhere.attrs":                                ``,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := removeDamagedSidecars(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Cut short or empty beside an existing blob; not a readable "null",
	// not a sidecar without its blob (b.json), nothing outside .pulumi.
	want := []string{
		".pulumi/history/p/dev/dev-1.history.json.attrs",
		".pulumi/stacks/p/dev.json.attrs",
	}
	if strings.Join(removed, ",") != strings.Join(want, ",") {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	for name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		gone := errors.Is(err, os.ErrNotExist)
		if gone != slices.Contains(want, name) {
			t.Errorf("%s: removed %v", name, gone)
		}
	}
	if removed, err := removeDamagedSidecars(t.TempDir()); err != nil || len(removed) != 0 {
		t.Fatalf("a directory without a backend: removed %q, err %v", removed, err)
	}
}

func TestDamagedSidecar(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("error: failed to load checkpoint: EOF"), true},
		{errors.New("exit status 255\nstderr: error: failed to load checkpoint: unexpected EOF\n"), true},
		{errors.New("error: reading history file .pulumi/history/p/dev/dev-1.history.json: EOF"), true},
		{errors.New("stderr: error: EOF\n"), true},
		{errors.New("error: rpc error: code = Unavailable desc = error reading from server: EOF"), false},
		{errors.New("error: unexpected end of JSON input"), false},
		{errors.New("error: the stack is currently locked by 1 lock(s)"), false},
	} {
		if got := damagedSidecar(tc.err); got != tc.want {
			t.Errorf("damagedSidecar(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestCommitTitle(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"title", "title"},
		{"title\n\nbody", "title"},
		{"title\r\nbody", "title"},
		{"title\rrest", "title"},
	} {
		if got := commitTitle(tc.in); got != tc.want {
			t.Errorf("commitTitle(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
