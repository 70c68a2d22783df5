package receiver_test

import (
	"os"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/opsuite"
	"github.com/stackyard/stackyard/test/testenv"
)

// The whole operator runs against the real API server as its
// ServiceAccount, bound to the generated RBAC only, serving the Receivers'
// endpoint on loopback, with the real pulumi CLI and git's http-backend.
var (
	env *testenv.Env
	// receiverURL is the operator's receiver endpoint.
	receiverURL string
	logs        testenv.SyncBuffer
)

const passphrase = "passphrase-of-the-receiver-suite-0c1f"

func TestMain(m *testing.M) {
	os.Exit(opsuite.Run(m, opsuite.Options{
		Name:       "receiver-test",
		Passphrase: passphrase,
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme, notificationv1alpha1.AddToScheme,
		},
		FluxCRDs: true,
		Receiver: true,
		Logs:     &logs,
		Operator: operator.Options{IdleAfter: 5 * time.Second},
	}, func(s *opsuite.Suite) error {
		env, receiverURL = s.Env, s.ReceiverURL
		return nil
	}))
}
