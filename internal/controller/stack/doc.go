// Package stack holds the Stack reconciler: it resolves where a Stack's
// program comes from, keeps a Workspace for it, decides whether an update is
// due, runs it as an Update object and reports the result in the Stack's
// status, exactly as the Pulumi Kubernetes Operator v2 does where that is
// right, and better where it has known faults.
package stack
