package stack

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// testStack is a Stack web in namespace apps, with mut applied to its
// spec.
func testStack(mut func(*shared.StackSpec)) *pulumiv1.Stack {
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"},
		Spec:       shared.StackSpec{Stack: "org/web/dev", ServiceAccountName: "pulumi"},
	}
	if mut != nil {
		mut(&s.Spec)
	}
	return s
}
