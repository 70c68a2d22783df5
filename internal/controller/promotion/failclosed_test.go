package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestFailClosed: with an admission policy's binding gone (anyone could
// then forge an approval), a promotion into a gated stage waits, saying
// which one and what to do, and so does the stage; an ungated stage is
// still promoted into. With the policies installed again, the gated
// promotion goes on to ask for its approval.
func TestFailClosed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1 := repo.commit("v0"), repo.commit("v1")
	dev, devFile := gitStack(t, ns, "dev", repo.URL, c0)
	prod, _ := gitStack(t, ns, "prod", repo.URL, c0)
	create(t, dev)
	create(t, prod)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now()))
	create(t, stage(ns, "dev", []string{"dev"}, nil))
	create(t, stage(ns, "prod", []string{"prod"}, func(s *promotionv1alpha1.StageSpec) {
		s.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1}
	}))

	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "stackyard-approval"}}
	g.Expect(env.Client.Delete(ctx, binding)).To(Succeed())
	restored := false
	restore := func() {
		if !restored {
			restored = true
			g.Expect(env.InstallPolicies(ctx)).To(Succeed())
		}
	}
	defer restore()

	const missing = "the admission policies that hold the gates are not in force: ValidatingAdmissionPolicyBinding stackyard-approval is missing"
	toProd := askFor(ns, "to-prod", "prod", "r1", false)
	create(t, toProd)
	waitFor(t, toProd, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase).To(BeElementOf(promotionv1alpha1.PromotionPending, promotionv1alpha1.PromotionPhase("")))
		g.Expect(p.Status.Message).To(ContainSubstring(missing))
	})
	waitFor(t, &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}, opTimeout,
		func(g Gomega, st *promotionv1alpha1.Stage) {
			g.Expect(st.Status.WaitingFor).To(ContainSubstring(missing))
		})

	// An ungated stage is not held.
	toDev := askFor(ns, "to-dev", "dev", "r1", false)
	create(t, toDev)
	done := waitFinished(t, ns, "to-dev", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(readFile(g, devFile)).To(Equal("v1"))

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(toProd), toProd)).To(Succeed())
	g.Expect(toProd.Status.StartTime).To(BeNil(), "nothing may have started in prod")

	restore()
	waitFor(t, toProd, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Message).To(HavePrefix("waiting for approval"))
	})
}
