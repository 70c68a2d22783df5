// Package surface derives the attack surface of change management from
// what the operator itself declares, its generated ClusterRole and its
// CRDs, and walks all of it as an attacker with ordinary rights would, on
// the real API server with the admission policies installed and the whole
// operator running a live pipeline: every kind the operator reads, every
// verb an ordinary user may hold on it (create, update, patch, delete, on
// the object and its status), every field of its schema, and every label,
// annotation and owner reference the operator's code names. After each
// kind's mutations it checks that nothing reached the gated stage, that
// no Stack deploys a commit its pipeline did not choose, that no
// operation ran in an operator's Workspace but its maker's, and that no
// record claims an operation that did not run. A kind or field added
// later is walked without anyone adding it here.
package surface

import (
	"os"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	pulumiv1alpha1 "github.com/stackyard/stackyard/api/pulumi/v1alpha1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/opsuite"
	"github.com/stackyard/stackyard/test/testenv"
)

var (
	env  *testenv.Env
	logs testenv.SyncBuffer
)

const passphrase = "passphrase-of-the-surface-suite-7e31"

func TestMain(m *testing.M) {
	os.Exit(opsuite.Run(m, opsuite.Options{
		Name:       "surface-test",
		Passphrase: passphrase,
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, pulumiv1alpha1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme,
			notificationv1alpha1.AddToScheme,
		},
		FluxCRDs: true,
		Logs:     &logs,
		Operator: operator.Options{IdleAfter: 5 * time.Second, MinResync: time.Second, StallAfter: 6 * time.Second},
	}, func(s *opsuite.Suite) error {
		env = s.Env
		return nil
	}))
}
