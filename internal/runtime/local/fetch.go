package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/proc"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

// Names inside a workspace's state directory (see the package doc).
const (
	sourceDir    = "source"
	homeDir      = "home"
	markerFile   = "source.json"
	resultFile   = "init-result.json"
	tokenFile    = "agent.token"
	pidFile      = "agent.pid"
	credsPattern = ".init-credentials-*" //nolint:gosec // a file name pattern, not a credential
)

// marker records what the source directory holds.
type marker struct {
	// Fingerprint is runtime.Source.Fingerprint of the fetched source.
	Fingerprint string `json:"fingerprint"`
	// Revision is the commit or digest fetched.
	Revision string `json:"revision,omitempty"`
	// Instance is drawn at random at each fetch: stack settings written
	// into the previous source directory are gone.
	Instance string `json:"instance"`
}

// readMarker returns the marker of dir, or nil when there is none.
func readMarker(dir string) *marker {
	b, err := os.ReadFile(filepath.Join(dir, markerFile))
	if err != nil {
		return nil
	}
	var m marker
	if json.Unmarshal(b, &m) != nil || m.Instance == "" {
		return nil
	}
	return &m
}

// writeMarker writes m through a temporary file, so a crash leaves either
// the old marker or the new one.
func writeMarker(dir string, m *marker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, markerFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, markerFile))
}

// randomID returns 16 random hex digits.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// prepareSource makes sure the state directory holds src, copying it from
// the source cache or else fetching it with `stackyard agent init` when it
// does not, and returns the marker. A cacheable source is looked up and
// fetched under its key's lock, so that Workspaces missing it at once
// fetch it once. The
// fetch replaces source/ only on success; home/ is never touched.
func (r *Runtime) prepareSource(ctx context.Context, ws *autov1alpha1.Workspace, src runtime.Source, dir string, env []string) (*marker, error) {
	fp := src.Fingerprint()
	if m := readMarker(dir); m != nil && m.Fingerprint == fp {
		if !src.NeedsInit() {
			return m, nil
		}
		if _, err := os.Stat(src.ProjectDir(filepath.Join(dir, sourceDir))); err == nil {
			return m, nil
		}
	}
	m := &marker{Fingerprint: fp, Instance: randomID()}
	if src.NeedsInit() {
		target := filepath.Join(dir, sourceDir)
		key, cacheable := r.sources.key(ws.Namespace, src)
		rev, cached := "", false
		if cacheable {
			unlock, err := r.sources.lockFetch(ctx, key)
			if err != nil {
				return nil, reconcile.NewGeneric("", fmt.Errorf("waiting for another Workspace's fetch of the same source: %w", err))
			}
			defer unlock()
			rev, cached = r.sources.restore(key, target)
		}
		if !cached {
			var err error
			if rev, err = r.fetch(ctx, ws, src, dir, env); err != nil {
				return nil, err
			}
			if cacheable {
				r.sources.store(key, target, rev)
			}
		}
		m.Revision = rev
	} else if fi, err := os.Stat(src.Dir); err != nil || !fi.IsDir() {
		return nil, reconcile.NewStalling(autov1alpha1.WorkspaceReasonSourceFailed,
			fmt.Errorf("spec.local.dir %q: not a directory on the operator's host", src.Dir))
	}
	if err := writeMarker(dir, m); err != nil {
		return nil, reconcile.NewGeneric("", fmt.Errorf("recording the fetched source: %w", err))
	}
	return m, nil
}

// fetch runs `stackyard agent init` into <dir>/source with the Workspace's
// credentials in short-lived files, and returns the revision fetched.
func (r *Runtime) fetch(ctx context.Context, ws *autov1alpha1.Workspace, src runtime.Source, dir string, env []string) (string, error) {
	credDir := ""
	if len(src.Credentials) > 0 {
		var err error
		if credDir, err = os.MkdirTemp(dir, credsPattern); err != nil {
			return "", reconcile.NewGeneric("", err)
		}
		defer os.RemoveAll(credDir)
		// The credentials fetch the source; the agent's environment does
		// not hold them, so their versions are not the agent's reads.
		creds := &envReads{r: r, reads: readset.Set{}}
		for _, c := range src.Credentials {
			data, err := creds.secretData(ctx, ws.Namespace, c.Secret.Name)
			if err != nil {
				return "", missing(err, c.Field, "secret", c.Secret.Name, nil)
			}
			v, ok := data[c.Secret.Key]
			if !ok {
				return "", reconcile.NewWaiting(ReasonEnvSourceMissing,
					fmt.Errorf("%s: key %q not found in secret %q", c.Field, c.Secret.Key, c.Secret.Name), 0)
			}
			if err := os.WriteFile(filepath.Join(credDir, c.FileName()), []byte(v), 0o600); err != nil {
				return "", reconcile.NewGeneric("", err)
			}
		}
	}
	args := []string{"agent", "init", "--target", filepath.Join(dir, sourceDir), "--result-file", filepath.Join(dir, resultFile)}
	args = append(args, src.InitArgs(func(c runtime.Credential) string { return filepath.Join(credDir, c.FileName()) })...)
	_ = os.Remove(filepath.Join(dir, resultFile))
	ctx, cancel := context.WithTimeout(ctx, r.opts.InitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.opts.AgentPath, args...)
	cmd.Env = env
	cmd.SysProcAttr = proc.GroupAttr()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return strings.TrimSpace(string(out)), nil
	}
	if b, rerr := os.ReadFile(filepath.Join(dir, resultFile)); rerr == nil {
		if rep, perr := source.ParseReport(string(b)); perr == nil && rep.Failed() {
			return "", src.FetchError(rep.Err())
		}
	}
	if ctx.Err() != nil {
		return "", reconcile.NewGeneric(autov1alpha1.WorkspaceReasonSourceFailed,
			fmt.Errorf("fetching spec.%s: %w", src.Kind, ctx.Err()))
	}
	// No report: the init process itself failed (bad binary, killed).
	return "", reconcile.NewGeneric(autov1alpha1.WorkspaceReasonSourceFailed,
		fmt.Errorf("fetching spec.%s: %v: %s", src.Kind, err, lastLine(stderr.String())))
}

// lastLine returns the last non-empty line of text.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return lines[len(lines)-1]
}
