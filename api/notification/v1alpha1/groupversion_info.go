package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the kinds in this package.
	GroupVersion = schema.GroupVersion{Group: "notification.stackyard.dev", Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package so that they can be
	// registered with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme registers the kinds of this package with a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
