// Package v1 holds the pulumi.com/v1 API: the Stack kind, a Pulumi stack
// that the operator keeps deployed from a program source, and the Program
// kind, a Pulumi YAML program written as a Kubernetes object.
//
// v1 is the storage version of Stack. The schema is wire-compatible with the
// Pulumi Kubernetes Operator v2, so manifests written for that operator apply
// unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=pulumi.com
package v1
