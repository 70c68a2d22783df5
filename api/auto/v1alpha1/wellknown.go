package v1alpha1

// Finalizers and annotations the operator's controllers agree on. They are
// stated here, once, so that no controller reads another's package for
// them.
const (
	// UpdateFinalizer holds an Update while its operation may be running,
	// so that deleting it cancels the operation before the object goes.
	// It is removed as soon as the Update is complete. The Stack
	// controller creates its Updates with it, as the Update controller
	// would add it.
	UpdateFinalizer = "stackyard.dev/update-operation"
	// WorkspaceFinalizer makes the Workspace controller release a
	// Workspace's runtime resources (processes, state directory, pods)
	// before the Workspace goes.
	WorkspaceFinalizer = "stackyard.dev/workspace"
	// SecretOutputsAnnotation is set on an Update's outputs Secret to the
	// JSON array of its keys whose outputs are secret, sorted, e.g.
	// `["password"]`. The name and format are those of the Pulumi
	// Kubernetes Operator v2, whose Stack controller masks these outputs
	// when it copies them into a Stack's status.
	SecretOutputsAnnotation = "pulumi.com/secrets" //nolint:gosec // an annotation's name, not a credential
)

// UpdateCompleted reports whether an update event of an Update, from old
// to new, is its completion: old is not complete and new is.
func UpdateCompleted(old, new *Update) bool {
	return old != nil && new != nil && !old.Status.IsComplete() && new.Status.IsComplete()
}
