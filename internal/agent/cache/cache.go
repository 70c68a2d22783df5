// Package cache keeps the plugins the Pulumi CLI installs in a directory
// that outlives the agent: the kubernetes runtime's cache volume, which
// stays while a Workspace idles at zero pods. The CLI installs plugins
// under PULUMI_HOME/plugins, one directory per kind, name and version
// (resource-kubernetes-v4.24.0), so that is the cache's key: a program
// whose plugins are all there installs none, and a new version is a new
// entry. Link points PULUMI_HOME/plugins at the cache; Prune keeps it
// within a size.
//
// Several agents may share one cache (Workspaces given one volume). The
// CLI installs a plugin into a temporary directory beside its entry, under
// a lock file of the entry's name, and renames it into place, so an agent
// never sees half an entry and two agents do not install one plugin over
// each other. What a program's code can write to the cache, the next
// program that uses the cache runs: share a cache only between Workspaces
// that trust each other's programs (docs/workspace-cache.md).
package cache

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// PluginsDir is the cache's directory of plugins, under its root.
const PluginsDir = "plugins"

// Link makes home/plugins (PULUMI_HOME's plugin directory) a symbolic link
// to root/plugins, creating both as needed. A home/plugins that already
// holds plugins (an image that installs some) is left as it is, and Link
// fails saying so: the cache is then not used.
func Link(home, root string) error {
	target := filepath.Join(root, PluginsDir)
	if err := os.MkdirAll(target, 0o775); err != nil {
		return fmt.Errorf("the cache volume is not writable: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	link := filepath.Join(home, PluginsDir)
	fi, err := os.Lstat(link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		if dest, err := os.Readlink(link); err == nil && dest == target {
			return nil
		}
		if err := os.Remove(link); err != nil {
			return err
		}
	case fi.IsDir():
		entries, err := os.ReadDir(link)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return fmt.Errorf("%s already holds %d entries (installed in the image?); the cache is not used", link, len(entries))
		}
		if err := os.Remove(link); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s is neither a directory nor a link; the cache is not used", link)
	}
	return os.Symlink(target, link)
}

// Entry is one installed plugin in the cache.
type Entry struct {
	// Name is the entry's directory: kind-name-vVERSION.
	Name string
	// Size is the bytes its files hold.
	Size int64
	// Installed is when it was installed (the directory's modification
	// time, set when the CLI renamed it into place).
	Installed time.Time
}

// plugin is the entry's kind and name, without the version.
func (e Entry) plugin() string {
	if i := strings.LastIndex(e.Name, "-v"); i > 0 {
		return e.Name[:i]
	}
	return e.Name
}

// Entries lists the plugins installed in the cache under root, skipping
// what the CLI is installing (its temporary directories and lock files).
func Entries(root string) ([]Entry, error) {
	dir := filepath.Join(root, PluginsDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if !de.IsDir() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".partial") || !strings.Contains(name, "-v") {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, Entry{Name: name, Size: sizeOf(filepath.Join(dir, name)), Installed: fi.ModTime()})
	}
	return out, nil
}

// sizeOf is the bytes held by the regular files under dir.
func sizeOf(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// installedOrder orders entries oldest installed first. File times are as
// coarse as the kernel's clock tick: entries installed within one tick
// are taken in name order, the same in every pass.
func installedOrder(a, b Entry) int {
	return cmp.Or(a.Installed.Compare(b.Installed), cmp.Compare(a.Name, b.Name))
}

// installedAfter reports whether a comes after b in installedOrder.
func installedAfter(a, b Entry) bool { return installedOrder(a, b) > 0 }

// PackagesDir is the cache's directory of package managers' download
// caches, one directory each, under its root (the operator points the
// package managers there).
const PackagesDir = "packages"

// Prune keeps the cache under root within budget bytes and returns the
// entries it removed and the plugins it kept. Package managers' download
// caches go first, largest first: they hold what can be downloaded again,
// and a package manager cannot be told which of its files a program still
// uses. Then plugins, oldest installed first; the newest version of each
// plugin stays whatever its size: it is the one the programs most likely
// use. A budget of zero or less removes nothing.
func Prune(root string, budget int64) (removed, kept []Entry, err error) {
	entries, err := Entries(root)
	if err != nil || budget <= 0 {
		return nil, entries, err
	}
	packages := packageEntries(root)
	var total int64
	for _, e := range packages {
		total += e.Size
	}
	newest := map[string]Entry{}
	for _, e := range entries {
		total += e.Size
		if n, ok := newest[e.plugin()]; !ok || installedAfter(e, n) {
			newest[e.plugin()] = e
		}
	}
	slices.SortFunc(packages, func(a, b Entry) int { return cmp.Compare(b.Size, a.Size) })
	for _, e := range packages {
		if total <= budget {
			break
		}
		if err := remove(filepath.Join(root, PackagesDir), e.Name); err != nil {
			return removed, entries, err
		}
		total -= e.Size
		removed = append(removed, e)
	}
	slices.SortFunc(entries, installedOrder)
	for i, e := range entries {
		if total <= budget {
			return removed, append(kept, entries[i:]...), nil
		}
		if newest[e.plugin()].Name == e.Name {
			kept = append(kept, e)
			continue
		}
		if err := remove(filepath.Join(root, PluginsDir), e.Name); err != nil {
			return removed, append(kept, entries[i:]...), err
		}
		total -= e.Size
		removed = append(removed, e)
	}
	return removed, kept, nil
}

// packageEntries lists the package managers' caches under root, each
// directory under PackagesDir ("go" holds Go's two), sized.
func packageEntries(root string) []Entry {
	dir := filepath.Join(root, PackagesDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Entry
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, Entry{Name: de.Name(), Size: sizeOf(filepath.Join(dir, de.Name())), Installed: fi.ModTime()})
	}
	return out
}

// remove takes an entry out of dir by renaming it to a hidden name first,
// so that no CLI finds half of it, then deletes it. Go's module cache
// makes its files and directories read-only; they are made writable to
// be deleted.
func remove(dir, name string) error {
	trash, err := os.MkdirTemp(dir, ".removing-")
	if err != nil {
		return err
	}
	defer func() {
		if os.RemoveAll(trash) != nil {
			_ = filepath.WalkDir(trash, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					_ = os.Chmod(p, 0o700) //nolint:gosec // the agent's own cache, which only the agent and the program it runs (one user) write
				}
				return nil
			})
			_ = os.RemoveAll(trash)
		}
	}()
	return os.Rename(filepath.Join(dir, name), filepath.Join(trash, name))
}
