package flux

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/fluxsc"
	"github.com/stackyard/stackyard/test/s3server"
	"github.com/stackyard/stackyard/test/testenv"
)

// env is the control plane every test of the package shares, serving
// stackyard's CRDs and Flux's real source CRDs.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	// Flux's source-controller, its CRDs and ClusterRole, and the S3
	// server a Bucket source reads from, all built by `make tools`.
	if err := testenv.RequireBinaries(append(fluxsc.Required(), s3server.Binary)...); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	var err error
	env, err = testenv.Start(testenv.Options{
		AddToScheme:  []func(*runtime.Scheme) error{pulumiv1.AddToScheme},
		ExtraCRDDirs: []string{fluxsc.CRDDir()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}
