package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), with the fields
// this report reads. ImportPath is set on the build-output and build-fail
// actions, which name the package being built rather than tested.
type event struct {
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// key names one test of one package; Test is empty for the package itself.
type key struct{ pkg, test string }

// timing is how long a package or a top-level test took.
type timing struct {
	name    string
	seconds float64
}

// report accumulates the stream and writes what a person reads.
type report struct {
	out io.Writer
	// verbose prints every output event as it comes, and no failing
	// test's output a second time.
	verbose bool
	// output holds what each running test (and each package, under the
	// empty test name) printed, until it ends: a passing test's output is
	// dropped, a failing one's printed whole.
	output map[key][]string
	// ended marks the tests that reached pass, fail or skip.
	ended map[key]bool
	// failLine marks the packages whose own output held go test's
	// "FAIL\t<package>" line, so that it is not printed twice.
	failLine               map[string]bool
	passed, nFailed, skip  int
	failedPkgs, buildFails int
	packages, tests        []timing
}

func newReport(out io.Writer) *report {
	return &report{out: out, output: map[key][]string{}, ended: map[key]bool{}, failLine: map[string]bool{}}
}

// read consumes the stream to its end.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			// Not an event: the go command's own output (a compile
			// error, vet), printed as it comes.
			fmt.Fprintf(r.out, "%s\n", line)
			continue
		}
		r.event(ev)
	}
	return sc.Err()
}

func (r *report) event(ev event) {
	switch ev.Action {
	case "build-output":
		fmt.Fprint(r.out, ev.Output)
		return
	case "build-fail":
		r.buildFails++
		return
	}
	k := key{ev.Package, ev.Test}
	switch ev.Action {
	case "output":
		if ev.Test == "" && strings.HasPrefix(ev.Output, "FAIL\t"+ev.Package) {
			r.failLine[ev.Package] = true
		}
		if r.verbose {
			fmt.Fprint(r.out, ev.Output)
			return
		}
		r.output[k] = append(r.output[k], ev.Output)
	case "pass", "fail", "skip":
		if ev.Test == "" {
			r.packageEnd(ev)
			return
		}
		r.ended[k] = true
		switch ev.Action {
		case "pass":
			r.passed++
		case "fail":
			r.nFailed++
			r.print(k)
		case "skip":
			r.skip++
		}
		if !strings.Contains(ev.Test, "/") {
			r.tests = append(r.tests, timing{ev.Package + " " + ev.Test, ev.Elapsed})
		}
		delete(r.output, k)
	}
}

// packageEnd prints the package's line as go test does, and for a failed
// package everything it printed outside a test (a panic, a timeout, a
// TestMain's error) and the output of any test that never ended.
func (r *report) packageEnd(ev event) {
	k := key{ev.Package, ""}
	switch ev.Action {
	case "pass":
		fmt.Fprintf(r.out, "ok  \t%s\t%.3fs\n", ev.Package, ev.Elapsed)
		r.packages = append(r.packages, timing{ev.Package, ev.Elapsed})
	case "skip":
		fmt.Fprintf(r.out, "?   \t%s\t[no test files]\n", ev.Package)
	case "fail":
		r.failedPkgs++
		for _, open := range r.unended(ev.Package) {
			r.print(open)
		}
		r.print(k)
		if !r.failLine[ev.Package] {
			fmt.Fprintf(r.out, "FAIL\t%s\t%.3fs\n", ev.Package, ev.Elapsed)
		}
		r.packages = append(r.packages, timing{ev.Package, ev.Elapsed})
	}
	for kk := range r.output {
		if kk.pkg == ev.Package {
			delete(r.output, kk)
		}
	}
}

// unended lists the tests of pkg that started printing but never ended,
// in a stable order.
func (r *report) unended(pkg string) []key {
	var open []key
	for k := range r.output {
		if k.pkg == pkg && k.test != "" && !r.ended[k] {
			open = append(open, k)
		}
	}
	slices.SortFunc(open, func(a, b key) int { return cmp.Compare(a.test, b.test) })
	return open
}

func (r *report) print(k key) {
	for _, s := range r.output[k] {
		fmt.Fprint(r.out, s)
	}
}

// summary prints where the time went and the closing count.
func (r *report) summary(top int) {
	byTime := func(a, b timing) int { return cmp.Or(cmp.Compare(b.seconds, a.seconds), cmp.Compare(a.name, b.name)) }
	slices.SortFunc(r.packages, byTime)
	slices.SortFunc(r.tests, byTime)
	var total float64
	for _, p := range r.packages {
		total += p.seconds
	}
	fmt.Fprintf(r.out, "\nslowest packages (of %d, %.0fs in all):\n", len(r.packages), total)
	for _, p := range r.packages[:min(top, len(r.packages))] {
		fmt.Fprintf(r.out, "  %8.1fs  %s\n", p.seconds, p.name)
	}
	fmt.Fprintf(r.out, "slowest tests (of %d top-level):\n", len(r.tests))
	for _, t := range r.tests[:min(top, len(r.tests))] {
		fmt.Fprintf(r.out, "  %8.1fs  %s\n", t.seconds, t.name)
	}
	if r.buildFails > 0 || r.failedPkgs > 0 {
		fmt.Fprintf(r.out, "failed packages: %d, failed builds: %d\n", r.failedPkgs, r.buildFails)
	}
	fmt.Fprintf(r.out, "%d passed, %d failed, %d skipped\n", r.passed, r.nFailed, r.skip)
}

// failed reports whether anything failed: a test, a package or a build.
func (r *report) failed() bool {
	return r.nFailed > 0 || r.failedPkgs > 0 || r.buildFails > 0
}
