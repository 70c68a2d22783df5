// Command testreport reads the event stream of `go test -json` on its
// standard input and prints what a person wants from `make test`: one line
// per package as go test itself prints it ("ok", "FAIL", "?"), the whole
// output of every test that failed, and, at the end, where the time went
// (the slowest packages and tests) and a closing line "N passed, N failed,
// N skipped".
//
// Lines that are not JSON (a compiler's or vet's own output) pass through
// unchanged. It exits 1 when a test, a package or a build failed, so that
// `go test -json ./... | testreport` fails as go test would.
//
//	go test -json -count=1 ./... | go run ./hack/testreport [-top 15] [-v]
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	top := flag.Int("top", 15, "how many of the slowest packages and tests to list")
	verbose := flag.Bool("v", false, "print every test's output as it comes, as go test -v does")
	flag.Parse()
	r := newReport(os.Stdout)
	r.verbose = *verbose
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r.summary(*top)
	if r.failed() {
		os.Exit(1)
	}
}
