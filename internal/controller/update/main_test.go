package update

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/testenv"
)

// env is the control plane every test of the package shares.
var env *testenv.Env

// requiredBinaries are what the tests run: the control plane, the Pulumi
// CLI, its YAML language host and the test provider.
var requiredBinaries = []string{"etcd", "kube-apiserver", "pulumi", "pulumi-language-yaml", "pulumi-resource-stackyardtest"}

// TestMain fails at once when a binary is missing, isolates the Pulumi CLI
// from the machine (its own PULUMI_HOME, no update check, no plugin
// downloads, bin/ first on PATH so the pinned tools and the test provider
// are found), and starts one control plane for the package.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if benchmarksOnly() {
		// The benchmarks (outcome_bench_test.go) are pure: no control
		// plane.
		return m.Run()
	}
	if err := testenv.RequireBinaries(requiredBinaries...); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	home, err := os.MkdirTemp("", "update-controller-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(home) }()
	for k, v := range map[string]string{
		"PATH":                     testenv.BinDir() + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PULUMI_HOME":              filepath.Join(home, "pulumi-home"),
		"PULUMI_CONFIG_PASSPHRASE": testPassphrase,
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK":    "true",
		"PULUMI_ACCESS_TOKEN":                         "",
	} {
		_ = os.Setenv(k, v)
	}

	// The managers log through their own loggers; this silences the
	// global one that client-go's informers fall back to.
	ctrl.SetLogger(logr.Discard())
	env, err = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{autov1alpha1.AddToScheme, pulumiv1.AddToScheme}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	return m.Run()
}

// benchmarksOnly reports whether this run selects no test and some
// benchmarks (`go test -run '^$' -bench ...`, as `make bench-go` runs).
func benchmarksOnly() bool {
	flag.Parse()
	run, bench := flag.Lookup("test.run"), flag.Lookup("test.bench")
	return run != nil && run.Value.String() == "^$" && bench != nil && bench.Value.String() != ""
}
