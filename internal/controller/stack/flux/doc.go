// Package flux resolves a Stack's spec.fluxSource: it reads the referenced
// Flux source object (GitRepository, OCIRepository, Bucket or
// ExternalArtifact, group source.toolkit.fluxcd.io, any version) as
// unstructured and returns the artifact it publishes, which the workspace
// then downloads with source.FetchArtifact and checks against its digest.
//
// Failures are typed for the Stack controller (internal/reconcile):
//
//   - the object is missing, has not reconciled its latest generation, is
//     not Ready, has no artifact yet, or its kind is not served by the
//     cluster: *reconcile.Waiting with reason ReasonSourceUnavailable
//     ("SourceUnavailable", PKO's reason for an unavailable source), since
//     Flux or a human will fix it without the Stack changing;
//   - the reference itself is wrong (another API group, an unsupported
//     kind, no name): *reconcile.Stalling with reason "SpecInvalid";
//   - the API call failed otherwise: *reconcile.Generic.
//
// watch.go gives the Stack controller what it needs to be told when a
// source's artifact changes: a field index of Stacks by the source they
// reference, a map function from a Flux object to those Stacks, and a
// predicate that passes only artifact and readiness changes.
package flux
