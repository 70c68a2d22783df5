//go:build gitops

// Package gitops runs the GitOps half of the seeds for real: Flux's
// source-controller and kustomize-controller, and Argo CD's application
// controller and repo server, sync Stack, Stage and Pipeline manifests
// from a git repository on loopback to the test API server, as a
// ServiceAccount bound to one of the shipped roles for people, while the
// whole operator (in this process, as its own ServiceAccount with the
// generated RBAC, the admission policies installed) deploys the Stacks
// with the real pulumi, and promotions pin them. The suite runs behind
// the build tag gitops (`make test-gitops`, Flux); the Argo CD test also
// needs the tag argocd (`make test-argocd`), since building Argo CD does
// not fit the CI budget.
package gitops

import (
	"context"
	"os"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/test/opsuite"
	"github.com/stackyard/stackyard/test/testenv"
)

var (
	// argocdRequired and argocdCRDs are what the Argo CD test needs
	// beyond Flux's, set by argocd_test.go when it is built (tag argocd).
	argocdRequired, argocdCRDs []string

	env *testenv.Env
	// logs holds everything the operator logged; STACKYARD_TEST_LOG=1
	// also prints it.
	logs testenv.SyncBuffer
	// testUser is the name the administrator's client is authenticated
	// as, which a promotion it asks for must name.
	testUser string
)

const (
	passphrase = "passphrase-of-the-gitops-suite-7c1e"
	// stallAfter is how long a failure lasts before the Stack stalls.
	stallAfter = 6 * time.Second
)

func TestMain(m *testing.M) {
	code := opsuite.Run(m, opsuite.Options{
		Name:       "gitops-test",
		Passphrase: passphrase,
		// Each test's controllers check their own binaries as they start
		// (fluxsc.Start, fluxkc.Start, argocdrun.Start), so that one
		// test runs without the others' tools built.
		Required:     argocdRequired,
		ExtraCRDDirs: argocdCRDs,
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme,
		},
		FluxCRDs: true,
		// Who edited a governed Stack (Flux's or Argo CD's identity) is
		// recorded, so that a person's approval of the change counts.
		Webhooks: true,
		Logs:     &logs,
		Operator: operator.Options{IdleAfter: 5 * time.Second, MinResync: time.Second, StallAfter: stallAfter},
	}, func(s *opsuite.Suite) error {
		env = s.Env
		c, err := pipelinectl.New(env.Config, "")
		if err != nil {
			return err
		}
		testUser, err = c.WhoAmI(context.Background())
		return err
	})
	os.Exit(code)
}
