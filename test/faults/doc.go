// Package faults injects the failures an operator meets in production into
// stackyard running on the real components, and checks what it promises
// about each: the operator killed with SIGKILL at a random point of an
// update, an agent killed mid-update, a program that hangs, the git host
// unreachable, a full disk under the workspaces. The control plane is
// envtest's kube-apiserver and etcd from bin/, the operator is the
// stackyard binary built from this tree and run as a process of its own
// (testenv.Operator) as its packaged ServiceAccount, programs run under
// the pinned pulumi CLI with the test provider, whose journal
// (provider.JournalEnv) counts every write that reaches a resource, and
// git is test/gitserver behind a proxy the test can close.
//
// Every scenario draws its random choices from a seed it prints; setting
// FAULTS_SEED replays the same choices (the timing of the machine still
// varies). The tests are in the default `go test` run with small counts;
// `make test-faults` runs them behind the "faults" build tag with the
// counts docs/reliability.md reports. FAULTS_N overrides the number of
// operator kills.
package faults
