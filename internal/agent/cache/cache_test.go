package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLink(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, home, root string)
		wantErr string
	}{
		{name: "a new home"},
		{name: "linked already", prepare: func(t *testing.T, home, root string) {
			if err := Link(home, root); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "an empty plugin directory", prepare: func(t *testing.T, home, _ string) {
			mkdir(t, filepath.Join(home, PluginsDir))
		}},
		{name: "a link elsewhere", prepare: func(t *testing.T, home, _ string) {
			mkdir(t, home)
			if err := os.Symlink(t.TempDir(), filepath.Join(home, PluginsDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "plugins from the image", wantErr: "already holds 1 entries", prepare: func(t *testing.T, home, _ string) {
			mkdir(t, filepath.Join(home, PluginsDir, "resource-aws-v7.0.0"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, root := filepath.Join(t.TempDir(), ".pulumi"), t.TempDir()
			if tc.prepare != nil {
				tc.prepare(t, home, root)
			}
			err := Link(home, root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if _, err := os.Stat(filepath.Join(home, PluginsDir, "resource-aws-v7.0.0")); err != nil {
					t.Errorf("the image's plugins were touched: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// What the CLI writes under PULUMI_HOME/plugins lands in the
			// cache.
			mkdir(t, filepath.Join(home, PluginsDir, "resource-kubernetes-v4.24.0"))
			if _, err := os.Stat(filepath.Join(root, PluginsDir, "resource-kubernetes-v4.24.0")); err != nil {
				t.Errorf("not in the cache: %v", err)
			}
		})
	}
	t.Run("an unwritable cache", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, PluginsDir), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Link(filepath.Join(t.TempDir(), ".pulumi"), root); err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestPrune(t *testing.T) {
	root := t.TempDir()
	day := 24 * time.Hour
	now := time.Now()
	put := func(name string, size int, age time.Duration) {
		dir := filepath.Join(root, PluginsDir, name)
		mkdir(t, dir)
		if err := os.WriteFile(filepath.Join(dir, "bin"), make([]byte, size), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	put("resource-kubernetes-v4.20.0", 400, 30*day)
	put("resource-kubernetes-v4.24.0", 400, 2*day)
	put("resource-aws-v6.0.0", 300, 20*day)
	put("resource-aws-v7.0.0", 300, 10*day)
	put("resource-random-v4.0.0", 100, 40*day) // the only version: stays
	mkdir(t, filepath.Join(root, PluginsDir, "resource-big-v1.0.0.partial"))
	mkdir(t, filepath.Join(root, PluginsDir, ".tmp-install"))
	if err := os.WriteFile(filepath.Join(root, PluginsDir, "resource-kubernetes-v4.24.0.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	entries, err := Entries(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Fatalf("entries %v: installs in progress are not entries", entries)
	}

	if removed, _, err := Prune(root, 0); err != nil || len(removed) != 0 {
		t.Fatalf("no budget: removed %v, %v", removed, err)
	}
	if removed, _, err := Prune(root, 2000); err != nil || len(removed) != 0 {
		t.Fatalf("within budget: removed %v, %v", removed, err)
	}
	// 1500 bytes held; a budget of 1000 removes the older kubernetes
	// (400, then 1100 left) and the older aws (300, then 800 left).
	removed, kept, err := Prune(root, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var names, keptNames []string
	for _, e := range removed {
		names = append(names, e.Name)
	}
	if want := []string{"resource-kubernetes-v4.20.0", "resource-aws-v6.0.0"}; !slices.Equal(names, want) {
		t.Errorf("removed %v, want %v", names, want)
	}
	for _, e := range kept {
		keptNames = append(keptNames, e.Name)
	}
	slices.Sort(keptNames)
	if want := []string{"resource-aws-v7.0.0", "resource-kubernetes-v4.24.0", "resource-random-v4.0.0"}; !slices.Equal(keptNames, want) {
		t.Errorf("kept %v, want %v", keptNames, want)
	}
	// A budget under the newest versions' size removes nothing more.
	if removed, _, err := Prune(root, 10); err != nil || len(removed) != 0 {
		t.Errorf("the newest versions must stay: removed %v, %v", removed, err)
	}
	left, _ := os.ReadDir(filepath.Join(root, PluginsDir))
	var leftNames []string
	for _, e := range left {
		leftNames = append(leftNames, e.Name())
	}
	for _, want := range []string{"resource-kubernetes-v4.24.0", "resource-aws-v7.0.0", "resource-random-v4.0.0", "resource-big-v1.0.0.partial", "resource-kubernetes-v4.24.0.lock"} {
		if !slices.Contains(leftNames, want) {
			t.Errorf("%s is gone: %v", want, leftNames)
		}
	}
	for _, n := range leftNames {
		if strings.HasPrefix(n, ".removing-") {
			t.Errorf("a removal left %s", n)
		}
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestPrunePackagesFirst: package managers' download caches go before
// any plugin, largest first, read-only trees (Go's module cache) too.
func TestPrunePackagesFirst(t *testing.T) {
	root := t.TempDir()
	write := func(dir string, size int) {
		mkdir(t, dir)
		if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, size), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, PluginsDir, "resource-kubernetes-v4.20.0"), 300)
	write(filepath.Join(root, PluginsDir, "resource-kubernetes-v4.24.0"), 300)
	// Installed an hour apart: written one after the other, both could
	// carry the same time (file times are as coarse as the kernel's clock
	// tick), and the test then depended on the tie-break.
	day := time.Now().Add(-24 * time.Hour)
	for dir, at := range map[string]time.Time{"resource-kubernetes-v4.20.0": day.Add(-time.Hour), "resource-kubernetes-v4.24.0": day} {
		if err := os.Chtimes(filepath.Join(root, PluginsDir, dir), at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, PackagesDir, "npm", "_cacache"), 500)
	write(filepath.Join(root, PackagesDir, "go", "mod", "example.com", "m@v1.0.0"), 200)
	// Go's module cache: read-only directories.
	for _, d := range []string{"go/mod/example.com/m@v1.0.0", "go/mod/example.com"} {
		if err := os.Chmod(filepath.Join(root, PackagesDir, d), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	// 1300 bytes; within 900, npm (500) goes, and nothing else.
	removed, _, err := Prune(root, 900)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Name != "npm" {
		t.Fatalf("removed %v, want the npm cache", removed)
	}
	// Within 500: go (200) goes, then the older plugin.
	removed, _, err = Prune(root, 500)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range removed {
		names = append(names, e.Name)
	}
	if want := []string{"go", "resource-kubernetes-v4.20.0"}; !slices.Equal(names, want) {
		t.Fatalf("removed %v, want %v", names, want)
	}
	left, _ := os.ReadDir(filepath.Join(root, PackagesDir))
	if len(left) != 0 {
		t.Errorf("left in packages: %v (a removal must leave nothing behind)", left)
	}
}

// TestPruneTiesByName: plugins installed within one clock tick carry the
// same time; the pass is still the same every time, by name.
func TestPruneTiesByName(t *testing.T) {
	root := t.TempDir()
	at := time.Now().Add(-time.Hour)
	for _, dir := range []string{"resource-kubernetes-v4.24.0", "resource-kubernetes-v4.20.0"} {
		d := filepath.Join(root, PluginsDir, dir)
		mkdir(t, d)
		if err := os.WriteFile(filepath.Join(d, "f"), make([]byte, 300), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, at, at); err != nil {
			t.Fatal(err)
		}
	}
	removed, _, err := Prune(root, 300)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Name != "resource-kubernetes-v4.20.0" {
		t.Fatalf("removed %v, want resource-kubernetes-v4.20.0 (the first by name of two installed at once)", removed)
	}
}
