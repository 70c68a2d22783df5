package stack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestS3Backend keeps a Stack's state in an S3 bucket rather than on a file
// system: a self-managed backend URL with its credentials given through
// envRefs Secrets. The S3 server (an in-process S3 implementation on
// loopback) refuses requests whose signature does not name the Stack's
// access key ID (it does not verify signatures, so the secret key's way is
// shown only by the CLI signing at all), and holds the stack's state
// afterwards.
func TestS3Backend(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := t.TempDir()
	const keyID, secretKey = "AKIASTACKYARDTEST", "s3-secret-access-key"
	neverLogged(secretKey)

	store := s3mem.New()
	g.Expect(store.CreateBucket("pulumi-state")).To(Succeed())
	var signed, refused atomic.Int64
	faker := gofakes3.New(store).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+keyID+"/") {
			refused.Add(1)
			http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
			return
		}
		signed.Add(1)
		faker.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	backend := fmt.Sprintf("s3://pulumi-state?endpoint=%s&disableSSL=true&s3ForcePathStyle=true&region=us-east-1",
		strings.TrimPrefix(srv.URL, "http://"))

	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "aws", Namespace: ns},
		StringData: map[string]string{"id": keyID, "secret": secretKey},
	})).To(Succeed())
	target := filepath.Join(dir, "page.txt")
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "bucketed", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backend,
			GitSource: programSource(t, "bucketed", fileProgram("bucketed", target, "from-s3-state", 0)),
			EnvRefs: map[string]shared.ResourceRef{
				"AWS_ACCESS_KEY_ID":     shared.NewSecretResourceRef("aws", "id"),
				"AWS_SECRET_ACCESS_KEY": shared.NewSecretResourceRef("aws", "secret"),
			},
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, "bucketed", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from-s3-state"))

	g.Expect(signed.Load()).To(BeNumerically(">", 0))
	g.Expect(refused.Load()).To(BeZero(), "every request carried the Stack's credentials")
	objects, err := store.ListBucket("pulumi-state", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	g.Expect(err).NotTo(HaveOccurred())
	var keys []string
	for _, o := range objects.Contents {
		keys = append(keys, o.Key)
	}
	g.Expect(keys).To(ContainElement(".pulumi/stacks/bucketed/dev.json"))
}
