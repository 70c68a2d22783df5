package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// selection is what a SelectStack request asked for.
type selection struct {
	name            string
	create          bool
	secretsProvider string
}

// warmth is what this agent process has learned from its own calls, so
// that a warm agent skips the CLI commands whose answer it already has
// (see "Warm agent" in the package doc). It lives in memory: a new agent
// process knows nothing of it, and runs every command, except what the
// previous agent over the same directory carried over (carried.go). The
// Server's mu guards it.
type warmth struct {
	// selected is the request the current stack was selected with, and
	// selectedFiles the fingerprint of its settings files right after; nil
	// when the selection is not to be trusted.
	selected      *selection
	selectedFiles string
	// stacks holds what is known about each stack, by name.
	stacks map[string]*stackWarmth
	// selectedBefore holds the stacks this process has selected: only its
	// first selection of a stack may trust what the previous agent carried
	// over (carried.go); later ones are this process's own business.
	selectedBefore map[string]bool
}

// stackWarmth is what an agent knows about one stack.
type stackWarmth struct {
	// config is the digest of the configuration SetAllConfig last applied
	// in full, and configFiles the fingerprint of the settings files right
	// after; empty when unknown.
	config, configFiles string
	// clean is set while the agent knows the stack's state to hold no
	// pending operation: it checked, or its last operation on the stack
	// ended cleanly on a state it knew to be clean, and nothing since has
	// cast doubt on that.
	clean bool
}

// stackWarmth returns the entry for stack, making it; s.mu must be held.
func (s *Server) stackWarmth(stack string) *stackWarmth {
	if s.warm.stacks == nil {
		s.warm.stacks = map[string]*stackWarmth{}
	}
	w := s.warm.stacks[stack]
	if w == nil {
		w = &stackWarmth{}
		s.warm.stacks[stack] = w
	}
	return w
}

// selectionWarm reports whether sel is the selection in place, made with
// the same request while the stack's settings files were as files says.
func (s *Server) selectionWarm(sel selection, files string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stack != nil && s.warm.selected != nil && *s.warm.selected == sel && s.warm.selectedFiles == files
}

// rememberSelection records that sel was selected, the settings files then
// having fingerprint files.
func (s *Server) rememberSelection(sel selection, files string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warm.selected, s.warm.selectedFiles = &sel, files
}

// firstSelection reports whether this process selects stack for the first
// time, and records that it has.
func (s *Server) firstSelection(stack string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warm.selectedBefore[stack] {
		return false
	}
	if s.warm.selectedBefore == nil {
		s.warm.selectedBefore = map[string]bool{}
	}
	s.warm.selectedBefore[stack] = true
	return true
}

// forgetSelection makes the next SelectStack run the CLI, whatever it asks.
func (s *Server) forgetSelection() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warm.selected = nil
}

// settingsWritten records that the agent itself changed stack's settings
// files (they now have fingerprint files), which leaves its selection as
// it was.
func (s *Server) settingsWritten(stack, files string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warm.selected != nil && s.warm.selected.name == stack {
		s.warm.selectedFiles = files
	}
}

// configWarm reports whether SetAllConfig last applied configuration with
// digest to stack, and the settings files are as it left them.
func (s *Server) configWarm(stack, digest, files string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.stackWarmth(stack)
	return w.config != "" && w.config == digest && w.configFiles == files
}

// rememberConfig records the configuration applied to stack; an empty
// digest forgets it.
func (s *Server) rememberConfig(stack, digest, files string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.stackWarmth(stack)
	w.config, w.configFiles = digest, files
}

// stateClean reports whether stack's state is known to hold no pending
// operation.
func (s *Server) stateClean(stack string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stackWarmth(stack).clean
}

// setStateClean records whether stack's state is known to hold no pending
// operation.
func (s *Server) setStateClean(stack string, clean bool) {
	s.mu.Lock()
	s.stackWarmth(stack).clean = clean
	s.mu.Unlock()
	s.updateCarried(stack, func(c *carried) { c.Clean = clean })
}

// forgetWarmth drops everything the agent knows, and what it would carry
// over to the next agent: it starts over as cold.
func (s *Server) forgetWarmth() {
	s.mu.Lock()
	stacks := make([]string, 0, len(s.warm.stacks)+1)
	for name := range s.warm.stacks {
		stacks = append(stacks, name)
	}
	if s.warm.selected != nil {
		stacks = append(stacks, s.warm.selected.name)
	}
	s.warm = warmth{}
	s.mu.Unlock()
	for _, name := range stacks {
		s.dropCarried(name)
	}
}

// configDigest digests the resolved configuration entries applied to
// stack, secret values included: it is compared, never shown or logged.
func configDigest(stack string, entries []configEntry) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", stack)
	for _, e := range entries {
		fmt.Fprintf(h, "%q %t %t %q %t %d\n", e.key, e.path, e.secret, e.value, e.object, e.typ)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// settingsFingerprint digests the files a stack's settings can come from:
// the project file and the stack settings file, under every name the CLI
// accepts, in the project directory and in the project's stackConfigDir.
// A missing file counts as such. Reading them costs far less than any CLI
// command, and it catches an edit made on disk behind the agent's back.
func (s *Server) settingsFingerprint(stack string) string {
	h := sha256.New()
	var configDir string
	for _, name := range projectFiles {
		if b := addFile(h, filepath.Join(s.opts.WorkDir, name)); b != nil && configDir == "" {
			var p struct {
				StackConfigDir string `yaml:"stackConfigDir"`
			}
			if yaml.Unmarshal(b, &p) == nil {
				configDir = p.StackConfigDir
			}
		}
	}
	short := stack[strings.LastIndex(stack, "/")+1:]
	dirs := []string{s.opts.WorkDir}
	if configDir != "" {
		dirs = append(dirs, filepath.Join(s.opts.WorkDir, configDir))
	}
	for _, dir := range dirs {
		for _, ext := range []string{".yaml", ".yml", ".json"} {
			addFile(h, filepath.Join(dir, "Pulumi."+short+ext))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// addFile feeds path and its content (or its absence) to h, and returns
// the content.
func addFile(h hash.Hash, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(h, "%q absent\n", path)
		return nil
	}
	fmt.Fprintf(h, "%q %d\n", path, len(b))
	h.Write(b)
	return b
}
