// Package programs_test runs real-world Pulumi programs through the whole
// operator: Pulumi's own providers, built from their Go modules, against
// real services, where the rest of the suites use the project's test
// provider. Today that is Pulumi's Kubernetes provider against the test
// API server; make test-cluster runs the same program on a real node with
// the kubernetes runtime.
package programs_test

import (
	"os"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/opsuite"
	"github.com/stackyard/stackyard/test/testenv"
)

var (
	env *testenv.Env
	// logs holds everything the operator logged; STACKYARD_TEST_LOG=1
	// also prints it.
	logs testenv.SyncBuffer
)

func TestMain(m *testing.M) {
	os.Exit(opsuite.Run(m, opsuite.Options{
		Name:        "programs-test",
		Passphrase:  "passphrase-of-the-programs-suite-0c7e",
		Required:    []string{"pulumi-resource-kubernetes"},
		AddToScheme: []func(*k8sruntime.Scheme) error{pulumiv1.AddToScheme, autov1alpha1.AddToScheme},
		Logs:        &logs,
		Operator:    operator.Options{IdleAfter: 5 * time.Second, MinResync: time.Second},
	}, func(s *opsuite.Suite) error {
		env = s.Env
		return nil
	}))
}
