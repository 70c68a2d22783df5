package stack_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/s3server"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestS3Backend keeps a Stack's state in an S3 bucket rather than on a file
// system: a self-managed backend URL with its credentials given through
// envRefs Secrets. The bucket is served by versitygw on loopback
// (test/s3server), which verifies every request's SigV4 signature against
// its one account. A Stack holding that account's keys deploys and its
// state is in the bucket afterwards; a Stack holding the right key ID and
// the wrong secret key is refused by the server: it stays not Ready with
// the server's SignatureDoesNotMatch in its conditions, runs no update and
// leaves nothing in the bucket.
func TestS3Backend(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	const keyID, secretKey, wrongKey = "AKIASTACKYARDTEST", "s3-secret-access-key", "not-the-s3-secret-key"
	neverLogged(secretKey, wrongKey)

	s3 := s3server.Start(t, s3server.Credentials{AccessKeyID: keyID, SecretAccessKey: secretKey})
	g.Expect(s3.CreateBucket(ctx, "pulumi-state")).To(Succeed())
	backend := fmt.Sprintf("s3://pulumi-state?endpoint=%s&disableSSL=true&s3ForcePathStyle=true&region=%s", s3.Endpoint, s3server.Region)

	for name, secret := range map[string]string{"aws": secretKey, "aws-wrong": wrongKey} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			StringData: map[string]string{"id": keyID, "secret": secret},
		})).To(Succeed())
	}
	stackWith := func(name, secret, target string) *pulumiv1.Stack {
		return &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: shared.StackSpec{
				Stack:     "dev",
				Backend:   backend,
				GitSource: programSource(t, name, fileProgram(name, target, "from-s3-state", 0)),
				EnvRefs: map[string]shared.ResourceRef{
					"AWS_ACCESS_KEY_ID":     shared.NewSecretResourceRef(secret, "id"),
					"AWS_SECRET_ACCESS_KEY": shared.NewSecretResourceRef(secret, "secret"),
				},
			},
		}
	}
	target := filepath.Join(dir, "page.txt")
	refusedTarget := filepath.Join(dir, "refused.txt")
	g.Expect(env.Client.Create(ctx, stackWith("bucketed", "aws", target))).To(Succeed())
	g.Expect(env.Client.Create(ctx, stackWith("refused", "aws-wrong", refusedTarget))).To(Succeed())

	waitStack(t, ns, "bucketed", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from-s3-state"))

	// The CLI fails as soon as it reads the backend, while the Workspace
	// sets the stack up, so no Update is ever started.
	s := waitStack(t, ns, "refused", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeFalse())
		g.Expect(s.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("SignatureDoesNotMatch"))))
	})
	g.Expect(s.Status.LastUpdate).To(BeNil(), "no update may run against a backend that refuses the Stack")
	g.Expect(refusedTarget).NotTo(BeAnExistingFile())

	keys, err := s3.Keys(ctx, "pulumi-state")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(ContainElement(".pulumi/stacks/bucketed/dev.json"))
	g.Expect(keys).NotTo(ContainElement(ContainSubstring("refused")), "the refused Stack wrote to the bucket")
}
