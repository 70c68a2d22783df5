package promotion_test

import (
	"context"
	"os"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	pulumiv1alpha1 "github.com/stackyard/stackyard/api/pulumi/v1alpha1"
	"github.com/stackyard/stackyard/internal/controller/promotion"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/test/opsuite"
	"github.com/stackyard/stackyard/test/testenv"
)

// The whole operator (the Stack, Workspace and Update controllers with the
// local runtime running the real agent, and the Pipeline, Stage and
// Promotion controllers) runs against the real API server as its
// ServiceAccount, bound to the generated RBAC only, with the real pulumi
// CLI, YAML host and test provider, and git's own http-backend.
var (
	env *testenv.Env
	// logs holds everything the operator logged; STACKYARD_TEST_LOG=1
	// also prints it.
	logs testenv.SyncBuffer
)

const (
	passphrase = "passphrase-of-the-promotion-suite-51d2"
	// stallAfter is how long a missing reference is waited for before the
	// object stalls.
	stallAfter = 6 * time.Second
)

func TestMain(m *testing.M) {
	code := opsuite.Run(m, opsuite.Options{
		Name:       "promotion-controller-test",
		Passphrase: passphrase,
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, pulumiv1alpha1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme,
		},
		FluxCRDs: true,
		Logs:     &logs,
		// The admission policies run as in a cluster: auto-promotions
		// pass only with the operator's autopromote right, and a test's
		// own promotions must name the user the tests act as.
		Operator: operator.Options{IdleAfter: 5 * time.Second, MinResync: time.Second, StallAfter: stallAfter},
	}, func(s *opsuite.Suite) (err error) {
		env = s.Env
		testUser, err = whoAmI()
		return err
	})
	promotion.StopVerifyAPI()
	os.Exit(code)
}

// whoAmI asks the API server, as the stackyard CLI does, who the tests'
// administrator client is.
func whoAmI() (string, error) {
	c, err := pipelinectl.New(env.Config, "")
	if err != nil {
		return "", err
	}
	return c.WhoAmI(context.Background())
}
