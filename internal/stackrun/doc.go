// Package stackrun builds what the operator runs for a Stack: the
// Workspace its spec makes (BuildWorkspace), from the source it resolves
// to (Source, SourceAt, GitAuth), and the Updates that run its operations
// (BuildUpdate), held to the plan a promotion approved (PlanFor). The Stack
// controller builds the Stack's own with it, and a promotion's or a pull
// request's preview (Preview) runs the same program, with the same
// inputs, in a Workspace and an Update of its own. It decides nothing
// about whether an operation may run: that is the choke point's
// (internal/change.Authorize).
package stackrun
