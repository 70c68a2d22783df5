package shared

// ResourceRef says where a value (a credential, an environment variable, a
// secret configuration value) is read from: a literal, a key of a Secret, or
// an environment variable or file of the workspace container, where the
// program runs. Set type and the one selector field that goes with it.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'Env' || has(self.env)",message="a ResourceRef of type Env must set env"
// +kubebuilder:validation:XValidation:rule="self.type != 'FS' || has(self.filesystem)",message="a ResourceRef of type FS must set filesystem"
// +kubebuilder:validation:XValidation:rule="self.type != 'Secret' || has(self.secret)",message="a ResourceRef of type Secret must set secret"
// +kubebuilder:validation:XValidation:rule="self.type != 'Literal' || has(self.literal)",message="a ResourceRef of type Literal must set literal"
type ResourceRef struct {
	// SelectorType is the kind of source: Env (an environment variable of
	// the workspace container), FS (a file of the workspace container, e.g.
	// from a volume added with the workspace template), Secret (a key of a
	// Secret in the Stack's namespace) or Literal (the value itself).
	SelectorType ResourceSelectorType `json:"type"`

	// ResourceSelector holds the selector fields, which sit directly in the
	// ResourceRef.
	ResourceSelector `json:",inline"`
}

// ResourceSelectorType is the kind of source a ResourceRef reads from.
// +kubebuilder:validation:Enum=Env;FS;Secret;Literal
type ResourceSelectorType string

const (
	// ResourceSelectorEnv reads an environment variable of the workspace
	// container.
	ResourceSelectorEnv ResourceSelectorType = "Env"
	// ResourceSelectorFS reads a file of the workspace container.
	ResourceSelectorFS ResourceSelectorType = "FS"
	// ResourceSelectorSecret reads a key of a Kubernetes Secret.
	ResourceSelectorSecret ResourceSelectorType = "Secret"
	// ResourceSelectorLiteral uses the given value as is.
	ResourceSelectorLiteral ResourceSelectorType = "Literal"
)

// ResourceSelector holds one selector per source kind; the ResourceRef's
// type says which one is used.
type ResourceSelector struct {
	// FileSystem selects a file of the workspace container (type FS).
	// +optional
	FileSystem *FSSelector `json:"filesystem,omitempty"`

	// Env selects an environment variable of the workspace container
	// (type Env).
	// +optional
	Env *EnvSelector `json:"env,omitempty"`

	// SecretRef selects a key of a Secret (type Secret).
	// +optional
	SecretRef *SecretSelector `json:"secret,omitempty"`

	// LiteralRef gives the value itself (type Literal).
	// +optional
	LiteralRef *LiteralRef `json:"literal,omitempty"`
}

// FSSelector selects a file whose content is the value.
type FSSelector struct {
	// Path is the file's absolute path in the workspace container.
	Path string `json:"path"`
}

// EnvSelector selects an environment variable whose value is the value.
type EnvSelector struct {
	// Name is the name of the workspace container's environment variable.
	Name string `json:"name"`
}

// SecretSelector selects a key of a Kubernetes Secret.
type SecretSelector struct {
	// Namespace is the Secret's namespace.
	// Deprecated: the Secret must be in the Stack's namespace; any other
	// value is refused unless the operator runs with namespace isolation
	// turned off.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name is the name of the Secret.
	Name string `json:"name"`

	// Key is the key within the Secret.
	Key string `json:"key"`
}

// LiteralRef gives a value inline.
type LiteralRef struct {
	// Value is the value itself.
	Value string `json:"value"`
}

// NewEnvResourceRef returns a ResourceRef reading the environment variable
// name.
func NewEnvResourceRef(name string) ResourceRef {
	return ResourceRef{
		SelectorType:     ResourceSelectorEnv,
		ResourceSelector: ResourceSelector{Env: &EnvSelector{Name: name}},
	}
}

// NewFileSystemResourceRef returns a ResourceRef reading the file at path.
func NewFileSystemResourceRef(path string) ResourceRef {
	return ResourceRef{
		SelectorType:     ResourceSelectorFS,
		ResourceSelector: ResourceSelector{FileSystem: &FSSelector{Path: path}},
	}
}

// NewSecretResourceRef returns a ResourceRef reading key of the Secret name in
// the referrer's namespace.
func NewSecretResourceRef(name, key string) ResourceRef {
	return ResourceRef{
		SelectorType:     ResourceSelectorSecret,
		ResourceSelector: ResourceSelector{SecretRef: &SecretSelector{Name: name, Key: key}},
	}
}

// NewLiteralResourceRef returns a ResourceRef holding value.
func NewLiteralResourceRef(value string) ResourceRef {
	return ResourceRef{
		SelectorType:     ResourceSelectorLiteral,
		ResourceSelector: ResourceSelector{LiteralRef: &LiteralRef{Value: value}},
	}
}
