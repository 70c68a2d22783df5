package flux

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/testenv"
)

// env is the control plane every test of the package shares, serving
// stackyard's CRDs and Flux's real source CRDs.
var env *testenv.Env

// fluxCRDDir is where `make tools` (mk/flux.mk) copies Flux's source CRDs.
func fluxCRDDir() string { return filepath.Join(testenv.BinDir(), "crds", "flux") }

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	crds, _ := filepath.Glob(filepath.Join(fluxCRDDir(), "source.toolkit.fluxcd.io_*.yaml"))
	if len(crds) == 0 {
		fmt.Fprintf(os.Stderr, "no Flux source CRDs in %s: run `make tools` (or `make test`, which copies them)\n", fluxCRDDir())
		os.Exit(1)
	}
	var err error
	env, err = testenv.Start(testenv.Options{
		AddToScheme:  []func(*runtime.Scheme) error{pulumiv1.AddToScheme},
		ExtraCRDDirs: []string{fluxCRDDir()},
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
