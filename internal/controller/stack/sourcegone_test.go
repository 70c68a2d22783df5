package stack_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestDestroyWhenSourceIsGone deletes the Program a Stack deploys, then the
// Stack: the destroy on finalize still runs, from the project name and
// runtime recorded in status.projectInfo, and removes the resources.
func TestDestroyWhenSourceIsGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stack, target := programStack(t, "orphan", func(s *shared.StackSpec) { s.DestroyOnFinalize = true })
	ns := stack.Namespace
	prog := &pulumiv1.Program{ObjectMeta: metav1.ObjectMeta{Name: "site", Namespace: ns}}
	s := waitStack(t, ns, "orphan", opTimeout, ready)
	g.Expect(s.Status.ProjectInfo).NotTo(BeNil())
	g.Expect(readFile(g, target)).To(Equal("from a Program"))

	g.Expect(env.Client.Delete(ctx, prog)).To(Succeed())
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(prog), &pulumiv1.Program{})
		return apierrors.IsNotFound(err)
	}, opTimeout, 250*time.Millisecond).Should(BeTrue(), "the Program must be gone before the Stack is deleted")

	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, ns, "orphan")).To(BeNil())
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return describe(getStack(NewWithT(t), ns, "orphan")) })
	_, err := os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the destroy must have removed the file")
}
