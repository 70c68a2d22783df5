package stack_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestTTL: a Stack shows when its TTL runs out, counted from its creation;
// once it has, the operator destroys the stack's resources, although
// destroyOnFinalize is unset, and deletes the Stack; with
// removeOnFinalize the stack leaves its backend too. A TTL set on a Stack
// that has lived longer expires it at once.
func TestTTL(t *testing.T) {
	g := NewWithT(t)
	stack, target := programStack(t, "short-lived", func(s *shared.StackSpec) { s.RemoveOnFinalize = true })
	ns := stack.Namespace
	waitStack(t, ns, "short-lived", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from a Program"))
	// The file backend keeps the stack dev under .pulumi/stacks/<project>
	// (and a backup, dev.json.bak, of a removed one).
	stackFiles := func() []string {
		files, err := filepath.Glob(filepath.Join(filepath.Dir(target), "state", ".pulumi", "stacks", "*", "dev.json"))
		g.Expect(err).NotTo(HaveOccurred())
		return files
	}
	g.Expect(stackFiles()).NotTo(BeEmpty(), "the stack is not where the test looks for it")

	setTTL := func(ttl time.Duration) {
		patchStack(g, ns, "short-lived", func(s *pulumiv1.Stack) { s.Spec.TTL = &metav1.Duration{Duration: ttl} })
	}
	setTTL(time.Hour)
	s := waitStack(t, ns, "short-lived", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.ExpiresAt).NotTo(BeNil(), "status.expiresAt")
	})
	g.Expect(s.Status.ExpiresAt.Time).To(BeTemporally("==", s.CreationTimestamp.Add(time.Hour)))
	g.Expect(readFile(g, target)).To(Equal("from a Program"), "a TTL still to run destroyed the resources")

	setTTL(time.Second)
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, ns, "short-lived")).To(BeNil())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	_, err := os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the expired Stack's resources were not destroyed")
	g.Expect(stackFiles()).To(BeEmpty(), "the stack is still in its backend")
}
