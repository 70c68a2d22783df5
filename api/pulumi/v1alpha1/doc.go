// Package v1alpha1 holds the deprecated pulumi.com/v1alpha1 version of the
// Stack kind. It is still served, with the same schema as pulumi.com/v1, so
// that old manifests keep working; new ones should use v1.
//
// +kubebuilder:object:generate=true
// +groupName=pulumi.com
package v1alpha1
