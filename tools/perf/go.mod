module github.com/stackyard/stackyard/tools/perf

go 1.26.0

// benchstat summarizes and compares the Go benchmarks of the reconcile hot
// paths (docs/go-benchmarks.md); mk/gobench.mk builds it into bin/benchstat
// for `make bench-go`. golang.org/x/perf has no release tags: the pin is a
// pseudo-version.
tool golang.org/x/perf/cmd/benchstat

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da // indirect
)
