package cloudapi

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// stackName is the {org}/{project}/{stack} of a request.
type stackName struct {
	org, project, stack string
}

// String returns "org/project/stack".
func (n stackName) String() string { return n.org + "/" + n.project + "/" + n.stack }

// deployedBy reports whether a Stack deploys the Pulumi stack n: its
// spec.stack is "org/project/stack", or "org/stack" or "stack" while the
// project its last operation reported (status.projectInfo.name) is
// n.project. A one-part name matches any organization: it is the backend's
// default one, which stackyard does not know.
func (n stackName) deployedBy(s *pulumiv1.Stack) bool {
	var project string
	if s.Status.ProjectInfo != nil {
		project = s.Status.ProjectInfo.Name
	}
	parts := strings.Split(s.Spec.Stack, "/")
	switch len(parts) {
	case 3:
		return parts[0] == n.org && parts[1] == n.project && parts[2] == n.stack
	case 2:
		return parts[0] == n.org && parts[1] == n.stack && project == n.project
	case 1:
		return parts[0] == n.stack && project == n.project
	}
	return false
}

// StackNameIndex indexes Stacks by the last part of spec.stack, the stack
// name every form of it ends with: a request reads the few Stacks that
// may deploy what it names, not every Stack.
const StackNameIndex = "cloudapi.spec.stack.name"

// SetupIndexes registers StackNameIndex with indexer.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &pulumiv1.Stack{}, StackNameIndex, func(obj client.Object) []string {
		s, ok := obj.(*pulumiv1.Stack)
		if !ok || s.Spec.Stack == "" {
			return nil
		}
		parts := strings.Split(s.Spec.Stack, "/")
		return []string{parts[len(parts)-1]}
	})
}
