package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

// carried is what an agent leaves, per stack, for the next agent process
// over the same project directory, backend and PULUMI_HOME: the local
// runtime starts a new agent when a new commit is fetched into the same
// directory, and keeps PULUMI_HOME. Without it, the first update of every
// new commit would export the state twice (once to adopt the secrets key
// material, once to look for pending operations) before it runs.
type carried struct {
	// Clean is set while the state is known to hold no pending operation,
	// as the in-memory warmth knows it. It is cleared, on disk, before each
	// operation begins, so an agent killed mid-run leaves it unset and the
	// next agent looks.
	Clean bool `json:"clean,omitempty"`
	// Selected is the selection (selectionKey) the previous agent made of
	// the stack with the CLI: a new agent trusts it and runs no `pulumi
	// stack select` for the same request. Every other command names the
	// stack, and one that finds it gone makes the agent forget this too.
	Selected string `json:"selected,omitempty"`
	// EncryptionSalt, SecretsProvider and EncryptedKey are the secrets key
	// material the stack's settings held after the last operation: what
	// adoptStateSecretsKey would otherwise read from an export of the
	// state. None of it is secret (a salt; a data key encrypted by a KMS).
	EncryptionSalt  string `json:"encryptionSalt,omitempty"`
	SecretsProvider string `json:"secretsProvider,omitempty"`
	EncryptedKey    string `json:"encryptedKey,omitempty"`
}

// selectionKey identifies a selection request in carried.Selected.
func selectionKey(sel selection) string {
	return fmt.Sprintf("%s\x00%t\x00%s", sel.name, sel.create, sel.secretsProvider)
}

// dropCarried removes what is carried over for stack.
func (s *Server) dropCarried(stack string) {
	if path := s.carriedPath(stack); path != "" {
		_ = os.Remove(path)
	}
}

// hasKey reports whether c holds secrets key material.
func (c carried) hasKey() bool { return c.EncryptionSalt != "" || c.EncryptedKey != "" }

// carriedDirName is the directory under PULUMI_HOME that holds what agents
// carry over.
const carriedDirName = "stackyard-carried"

// carriedPath is the file of stack, named by a digest of the backend, the
// project directory and the stack, so that an agent never takes over what
// was learned of another backend's stack or another project; "" when
// PULUMI_HOME is not known.
func (s *Server) carriedPath(stack string) string {
	home := s.opts.PulumiHome
	if home == "" {
		home = os.Getenv("PULUMI_HOME")
	}
	if home == "" {
		return ""
	}
	backend := s.opts.Env[backendURLEnv]
	if backend == "" {
		backend = os.Getenv(backendURLEnv)
	}
	return CarriedFile(home, backend, s.opts.WorkDir, s.projectName(), stack)
}

// CarriedFile is where an agent whose PULUMI_HOME is home keeps what it
// carries over for stack of project, in the program directory workDir, on
// backend: a digest of all four names the file.
func CarriedFile(home, backend, workDir, project, stack string) string {
	sum := sha256.Sum256([]byte(backend + "\x00" + workDir + "\x00" + project + "\x00" + stack))
	return filepath.Join(home, carriedDirName, hex.EncodeToString(sum[:16])+".json")
}

// projectName is the name the project file gives, "" when it cannot be
// read: a new commit may rename the project, which makes its stacks other
// stacks.
func (s *Server) projectName() string {
	for _, name := range projectFiles {
		proj, err := workspace.LoadProject(filepath.Join(s.opts.WorkDir, name))
		if err == nil {
			return string(proj.Name)
		}
	}
	return ""
}

// loadCarried reads what was carried over for stack; the zero value when
// nothing (or nothing readable) was.
func (s *Server) loadCarried(stack string) carried {
	var c carried
	path := s.carriedPath(stack)
	if path == "" {
		return c
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return carried{}
	}
	return c
}

// updateCarried changes what is carried over for stack with f. It is an
// optimisation only: a failure to write is logged and otherwise ignored,
// and costs the next agent the exports.
func (s *Server) updateCarried(stack string, f func(*carried)) {
	path := s.carriedPath(stack)
	if path == "" {
		return
	}
	c := s.loadCarried(stack)
	f(&c)
	b, err := json.Marshal(c)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		s.log.V(1).Info("could not record what the next agent may take over", "stack", stack, "error", err.Error())
	}
}

// carryKey records the secrets key material of stack's settings, when
// they hold some.
func (s *Server) carryKey(ctx context.Context, ws auto.Workspace, stack string) {
	settings, _, err := s.loadStackSettings(ctx, ws, stack)
	if err != nil || (settings.EncryptionSalt == "" && settings.EncryptedKey == "") {
		return
	}
	s.updateCarried(stack, func(c *carried) {
		c.EncryptionSalt, c.SecretsProvider, c.EncryptedKey = settings.EncryptionSalt, settings.SecretsProvider, settings.EncryptedKey
	})
}

// takeOverKey writes the carried secrets key material of stack into its
// settings, which hold none, and reports whether it did.
func (s *Server) takeOverKey(stack string, settings *workspace.ProjectStack, path string) bool {
	c := s.loadCarried(stack)
	if !c.hasKey() {
		return false
	}
	settings.EncryptionSalt, settings.EncryptedKey = c.EncryptionSalt, c.EncryptedKey
	if c.SecretsProvider != "" {
		settings.SecretsProvider = c.SecretsProvider
	}
	if err := settings.Save(path); err != nil {
		return false
	}
	s.log.Info("took over the secrets key material the previous agent recorded", "stack", stack)
	return true
}
