package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
)

// attrsSuffix is the suffix of the sidecar files in which a file://
// backend's blob library (gocloud.dev/blob/fileblob) keeps each blob's
// attributes: content type and MD5.
const attrsSuffix = ".attrs"

// backendURLEnv is the variable through which the CLI is told its backend.
const backendURLEnv = "PULUMI_BACKEND_URL"

// damagedText matches how the CLI reports a blob it could not read because
// its attributes sidecar is empty or cut short: the blob library decodes
// the sidecar with a JSON decoder, which says "EOF" or "unexpected EOF",
// and the self-managed backend wraps that for the checkpoint and the
// history, or prints it bare for a lock.
var damagedText = regexp.MustCompile(`(?m)(failed to load checkpoint|read checkpoint|reading history file \S+): (unexpected )?EOF\s*$|(^|stderr: )error: (unexpected )?EOF\s*$`)

// damagedSidecar reports whether err could come from an unreadable
// attributes sidecar. The blob library writes a sidecar in place (create,
// then write) before it renames the blob's new content over the old one, so
// a CLI killed between the two leaves an empty sidecar; from then on every
// read of that blob, even a check that it exists, fails, and the stack
// cannot be read until the file goes.
func damagedSidecar(err error) bool {
	return err != nil && damagedText.MatchString(stripANSI(err.Error()))
}

// fileBackendDir returns the directory of the file:// backend the CLI
// uses, resolved the way the CLI resolves it (PULUMI_BACKEND_URL, then the
// project's backend.url; "~" is the home directory and a relative path is
// relative to the project directory), or "" when the backend is not a
// directory on this machine.
func (s *Server) fileBackendDir(ctx context.Context) string {
	raw := s.opts.Env[backendURLEnv]
	if raw == "" {
		raw = os.Getenv(backendURLEnv)
	}
	if raw == "" {
		ws, err := s.workspace(ctx)
		if err != nil {
			return ""
		}
		if p, err := ws.ProjectSettings(ctx); err == nil && p != nil && p.Backend != nil {
			raw = p.Backend.URL
		}
	}
	return fileURLDir(raw, s.opts.WorkDir)
}

// fileURLDir turns a file:// backend URL into a directory; relative paths
// are taken from base. Any other URL gives "".
func fileURLDir(raw, base string) string {
	const prefix = "file://"
	if !strings.HasPrefix(raw, prefix) {
		return ""
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(raw, prefix), "?")
	if unescaped, err := url.PathUnescape(path); err == nil {
		path = unescaped
	}
	if path == "~" || strings.HasPrefix(path, "~/") {
		u, err := user.Current()
		if err != nil {
			return ""
		}
		path = filepath.Join(u.HomeDir, strings.TrimPrefix(path, "~"))
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(base, path)
	}
	return filepath.Clean(path)
}

// removeDamagedSidecars removes, under dir/.pulumi, every attributes
// sidecar of an existing blob that the blob library cannot decode (empty
// or cut short), and returns their paths relative to dir. A sidecar holds
// no state: without one the blob library reports default attributes and
// reads the blob as it is, so removing a damaged one loses nothing and
// makes the blob readable again. A sidecar without its blob (left by a
// write killed before the rename) breaks nothing and is left alone.
func removeDamagedSidecars(dir string) ([]string, error) {
	var removed []string
	root := filepath.Join(dir, ".pulumi")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, attrsSuffix) {
			return nil
		}
		if _, err := os.Stat(strings.TrimSuffix(path, attrsSuffix)); err != nil {
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // the workspace's own .pulumi, which only the agent and the program it runs (one user) write
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		var attrs map[string]any
		if json.NewDecoder(bytes.NewReader(b)).Decode(&attrs) == nil {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) { //nolint:gosec // the workspace's own .pulumi, which only the agent and the program it runs (one user) write
			return err
		}
		rel, rerr := filepath.Rel(dir, path)
		if rerr != nil {
			rel = path
		}
		removed = append(removed, rel)
		return nil
	})
	return removed, err
}

// withSidecarRepair runs attempt; if it fails in a way a damaged
// attributes sidecar of a file:// backend explains, and such sidecars are
// found and removed, it records them in log (when not nil) and, if
// repeatable says the failed attempt changed nothing, runs it once more;
// otherwise the caller's next call finds the backend readable. stack names
// the stack in the log.
func (s *Server) withSidecarRepair(ctx context.Context, stack string, log *repairLog, repeatable func() bool, attempt func() error) error {
	err := attempt()
	if !damagedSidecar(err) || ctx.Err() != nil {
		return err
	}
	dir := s.fileBackendDir(ctx)
	if dir == "" {
		return err
	}
	removed, rerr := removeDamagedSidecars(dir)
	if rerr != nil {
		s.log.Info("could not look for damaged backend files", "error", rerr.Error())
	}
	if len(removed) == 0 {
		return err
	}
	s.log.Info("removed damaged attribute files from the backend", "stack", stack, "files", removed)
	log.filesRemoved(removed)
	if !repeatable() {
		return err
	}
	return attempt()
}
