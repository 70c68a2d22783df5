package pullrequest_test

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
// ServiceAccount, bound to the generated RBAC only, with the admission
// policies applied, the real pulumi CLI, YAML host and test provider, and
// Gitea as the forge (test/forge): its pull requests, comments, commit
// statuses and the webhooks that tell the operator of them are real.
var (
	env *testenv.Env
	// logs holds everything the operator logged; STACKYARD_TEST_LOG=1
	// also prints it.
	logs testenv.SyncBuffer
	// receiverURL is the operator's receiver endpoint, where Gitea
	// delivers its pull request events.
	receiverURL string
)

const passphrase = "passphrase-of-the-pull-request-suite-7e21"

func TestMain(m *testing.M) {
	os.Exit(opsuite.Run(m, opsuite.Options{
		Name:       "pullrequest-test",
		Passphrase: passphrase,
		Required:   []string{"gitea"},
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme, notificationv1alpha1.AddToScheme,
		},
		Receiver: true,
		Logs:     &logs,
		Operator: operator.Options{IdleAfter: 5 * time.Second, DashboardURL: dashboardURL},
	}, func(s *opsuite.Suite) error {
		env, receiverURL = s.Env, s.ReceiverURL
		return nil
	}))
}
