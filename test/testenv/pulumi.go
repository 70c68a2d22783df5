package testenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// PulumiBinaries are what a test running real Pulumi operations needs in
// BinDir: the CLI, the YAML language host and the test provider.
var PulumiBinaries = []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-stackyardtest"}

// IsolatePulumi points the Pulumi CLI of this test process (and of the
// processes it starts) at a private home under dir, with bin/ first on PATH
// so the pinned tools and the test provider are found, no update checks, no
// plugin downloads and no Pulumi Cloud token, and sets the passphrase of the
// passphrase secrets provider.
func IsolatePulumi(dir, passphrase string) error {
	for k, v := range map[string]string{
		"PATH":                     BinDir() + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PULUMI_HOME":              filepath.Join(dir, "pulumi-home"),
		"PULUMI_CONFIG_PASSPHRASE": passphrase,
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK":    "true",
		"PULUMI_ACCESS_TOKEN":                         "",
		"GIT_CONFIG_GLOBAL":                           "/dev/null",
		"GIT_CONFIG_NOSYSTEM":                         "1",
	} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// PrebuiltEnv names the directory in which `make test` builds stackyard and
// the lean agent once, before any test runs, from the same sources and
// with the same stamps BuildStackyard uses; a dozen packages would
// otherwise link both binaries each. Unset (plain `go test`), every
// package builds its own.
const PrebuiltEnv = "STACKYARD_TEST_PREBUILT"

// stackyardBinaries are the two binaries BuildStackyard provides.
var stackyardBinaries = []string{"stackyard", "stackyard-agent"}

// BuildStackyard builds the stackyard binary into dir and returns its path,
// for tests that run the agent (or the operator) as a real subprocess. The
// lean agent (cmd/stackyard-agent) is built beside it, where the local
// runtime looks for it, so that the agents tests start are the ones users
// run. Under `make test` ($STACKYARD_TEST_PREBUILT set) both are copied from
// the build made before the tests instead.
func BuildStackyard(dir string) (string, error) {
	out := filepath.Join(dir, "stackyard")
	if prebuilt := os.Getenv(PrebuiltEnv); prebuilt != "" {
		for _, name := range stackyardBinaries {
			if err := copyExecutable(filepath.Join(prebuilt, name), filepath.Join(dir, name)); err != nil {
				return "", fmt.Errorf("$%s: %w (unset it to build here)", PrebuiltEnv, err)
			}
		}
		return out, nil
	}
	stamp := exec.Command(filepath.Join(RepoRoot(), "hack", "version-ldflags.sh"))
	ldflags, err := stamp.Output()
	if err != nil {
		return "", fmt.Errorf("hack/version-ldflags.sh: %w", err)
	}
	cmd := exec.Command("go", "build", "-ldflags", string(ldflags), "-o", dir+string(filepath.Separator), "./cmd/stackyard", "./cmd/stackyard-agent")
	cmd.Dir = RepoRoot()
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building stackyard: %v\n%s", err, msg)
	}
	return out, nil
}

// copyExecutable writes a copy of src to dst. A copy, not a hard link: go
// build may rewrite bin/'s files in place, and each package's binaries
// must stay as they were when it started.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // a test binary the suite built
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
