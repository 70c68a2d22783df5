package pulumiversion

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// root is the repository, two levels up from this package.
const root = "../.."

// TestPinIsCarried checks that everything which names the Pulumi version
// says the Makefile's PULUMI_VERSION: when it fails, `make generate`.
func TestPinIsCarried(t *testing.T) {
	makefile := read(t, "Makefile")
	m := regexp.MustCompile(`(?m)^PULUMI_VERSION := v(\S+)$`).FindStringSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile has no 'PULUMI_VERSION := v<version>' line")
	}
	if m[1] != Pinned {
		t.Errorf("the Makefile pins Pulumi %s but internal/pulumiversion says %s: run `make generate`", m[1], Pinned)
	}

	for file, modules := range map[string][]string{
		"go.mod":              {"github.com/pulumi/pulumi/sdk/v3"},
		"tools/pulumi/go.mod": {"github.com/pulumi/pulumi/pkg/v3", "github.com/pulumi/pulumi/sdk/v3"},
	} {
		f, err := modfile.Parse(file, []byte(read(t, file)), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range modules {
			found := false
			for _, r := range f.Require {
				if r.Mod.Path == want {
					found = true
					if r.Mod.Version != "v"+m[1] {
						t.Errorf("%s requires %s %s, the Makefile pins v%s: run `make generate`", file, want, r.Mod.Version, m[1])
					}
				}
			}
			if !found {
				t.Errorf("%s does not require %s", file, want)
			}
		}
	}

	image := regexp.MustCompile(`pulumi/pulumi:(3\.\d+\.\d+)`)
	named := 0
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, tag := range image.FindAllStringSubmatch(string(data), -1) {
			named++
			if tag[1] != m[1] {
				t.Errorf("%s names the image pulumi/pulumi:%s, the Makefile pins %s: run `make generate`", path, tag[1], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if named == 0 {
		t.Error("no doc names the default workspace image: is the pattern stale?")
	}
}

func read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
