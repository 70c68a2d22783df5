// Package shared holds the Stack API types that both served versions of the
// pulumi.com Stack kind (v1 and the deprecated v1alpha1) have in common: the
// StackSpec with its source, credential and lifecycle settings, and the
// building blocks of the Stack status.
//
// It is not an API group of its own; the kinds live in api/pulumi/v1 and
// api/pulumi/v1alpha1.
//
// +kubebuilder:object:generate=true
package shared
