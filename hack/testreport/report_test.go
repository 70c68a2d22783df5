package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	tests := []struct {
		name       string
		stream     string
		wantFailed bool
		want       []string // lines that must appear, in this order
		notWant    []string // text that must not appear
	}{
		{
			name: "a passing package prints one line and drops its tests' output",
			stream: `{"Action":"start","Package":"p/a"}
{"Action":"run","Package":"p/a","Test":"TestOne"}
{"Action":"output","Package":"p/a","Test":"TestOne","Output":"=== RUN   TestOne\n"}
{"Action":"output","Package":"p/a","Test":"TestOne","Output":"    one_test.go:9: chatty\n"}
{"Action":"pass","Package":"p/a","Test":"TestOne","Elapsed":2.5}
{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t2.600s\n"}
{"Action":"pass","Package":"p/a","Elapsed":2.6}
`,
			want:    []string{"ok  \tp/a\t2.600s", "slowest packages (of 1, 3s in all):", "     2.6s  p/a", "     2.5s  p/a TestOne", "1 passed, 0 failed, 0 skipped"},
			notWant: []string{"chatty"},
		},
		{
			name: "a failing test prints its own output and the package's FAIL line once",
			stream: `{"Action":"run","Package":"p/b","Test":"TestBad"}
{"Action":"output","Package":"p/b","Test":"TestBad","Output":"    bad_test.go:3: the reason\n"}
{"Action":"output","Package":"p/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.10s)\n"}
{"Action":"fail","Package":"p/b","Test":"TestBad","Elapsed":0.1}
{"Action":"run","Package":"p/b","Test":"TestSkip"}
{"Action":"skip","Package":"p/b","Test":"TestSkip"}
{"Action":"output","Package":"p/b","Output":"FAIL\n"}
{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t0.200s\n"}
{"Action":"fail","Package":"p/b","Elapsed":0.2}
`,
			wantFailed: true,
			want:       []string{"bad_test.go:3: the reason", "--- FAIL: TestBad", "FAIL\tp/b\t0.200s", "failed packages: 1, failed builds: 0", "0 passed, 1 failed, 1 skipped"},
		},
		{
			name: "a timeout prints the output of the test that never ended",
			stream: `{"Action":"run","Package":"p/c","Test":"TestHang"}
{"Action":"output","Package":"p/c","Test":"TestHang","Output":"    hang_test.go:5: waiting\n"}
{"Action":"output","Package":"p/c","Output":"panic: test timed out after 1m0s\n"}
{"Action":"fail","Package":"p/c","Elapsed":60}
`,
			wantFailed: true,
			want:       []string{"hang_test.go:5: waiting", "panic: test timed out", "FAIL\tp/c\t60.000s", "0 passed, 0 failed, 0 skipped"},
		},
		{
			name: "build output and plain lines pass through; a build failure fails",
			stream: `# p/d
vet: something plain
{"ImportPath":"p/d [p/d.test]","Action":"build-output","Output":"d.go:1:1: undefined: x\n"}
{"ImportPath":"p/d [p/d.test]","Action":"build-fail"}
{"Action":"start","Package":"p/d"}
{"Action":"output","Package":"p/d","Output":"FAIL\tp/d [build failed]\n"}
{"Action":"fail","Package":"p/d","Elapsed":0}
{"Action":"output","Package":"p/e","Output":"?   \tp/e\t[no test files]\n"}
{"Action":"skip","Package":"p/e","Elapsed":0}
`,
			wantFailed: true,
			want:       []string{"# p/d", "vet: something plain", "d.go:1:1: undefined: x", "FAIL\tp/d [build failed]", "?   \tp/e\t[no test files]", "failed packages: 1, failed builds: 1"},
		},
		{
			name: "subtests count, but only top-level tests are ranked",
			stream: `{"Action":"run","Package":"p/f","Test":"TestT"}
{"Action":"run","Package":"p/f","Test":"TestT/case"}
{"Action":"pass","Package":"p/f","Test":"TestT/case","Elapsed":9}
{"Action":"pass","Package":"p/f","Test":"TestT","Elapsed":9.5}
{"Action":"pass","Package":"p/f","Elapsed":10}
`,
			want:    []string{"slowest tests (of 1 top-level):", "     9.5s  p/f TestT", "2 passed, 0 failed, 0 skipped"},
			notWant: []string{"TestT/case"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			r := newReport(&out)
			if err := r.read(strings.NewReader(tt.stream)); err != nil {
				t.Fatal(err)
			}
			r.summary(5)
			got := out.String()
			if r.failed() != tt.wantFailed {
				t.Errorf("failed() = %v, want %v\n%s", r.failed(), tt.wantFailed, got)
			}
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q after the lines before it:\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, nw := range tt.notWant {
				if strings.Contains(got, nw) {
					t.Errorf("output holds %q:\n%s", nw, got)
				}
			}
			if n := strings.Count(got, "FAIL\tp/b\t"); n > 1 {
				t.Errorf("the package's FAIL line is printed %d times:\n%s", n, got)
			}
		})
	}
}

func TestReportVerbose(t *testing.T) {
	stream := `{"Action":"run","Package":"p/a","Test":"TestOne"}
{"Action":"output","Package":"p/a","Test":"TestOne","Output":"    one_test.go:9: chatty\n"}
{"Action":"output","Package":"p/a","Test":"TestOne","Output":"--- FAIL: TestOne (0.00s)\n"}
{"Action":"fail","Package":"p/a","Test":"TestOne","Elapsed":0}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.100s\n"}
{"Action":"fail","Package":"p/a","Elapsed":0.1}
`
	var out bytes.Buffer
	r := newReport(&out)
	r.verbose = true
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for text, want := range map[string]int{"chatty": 1, "--- FAIL: TestOne": 1, "FAIL\tp/a\t": 1} {
		if n := strings.Count(got, text); n != want {
			t.Errorf("%q appears %d times, want %d:\n%s", text, n, want, got)
		}
	}
}
