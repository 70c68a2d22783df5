// Package bench measures stackyard on the real components: an envtest
// control plane from bin/, a git server on loopback, the pinned Pulumi CLI
// with the test provider, and the operator built from this tree and run as
// a process of its own so that its CPU and memory can be read from /proc.
//
// The measurements are Go tests behind the "bench" build tag, so `make
// test` never runs them: `make bench-e2e` does, writes one JSON file per
// run into results/ and renders docs/benchmarks.md from it. Nothing here
// asserts a target; the document says which targets are met.
package bench
