// Package v1alpha1 holds the auto.pulumi.com/v1alpha1 API: the Workspace kind,
// an execution environment (a pod running the stackyard agent) holding one
// Pulumi project and its stacks, and the Update kind, one Pulumi operation
// (preview, up, destroy or refresh) run in a Workspace.
//
// The schema is wire-compatible with the Pulumi Kubernetes Operator v2, so
// manifests written for that operator apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=auto.pulumi.com
package v1alpha1
