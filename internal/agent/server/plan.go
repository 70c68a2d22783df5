package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
)

// Update plans (`pulumi preview --save-plan`, `pulumi up --plan`) travel
// as bytes in the protocol (PreviewRequest.save_plan, Result.plan,
// UpRequest.plan) and exist as files only for the length of one CLI run, in
// a directory of their own that only the agent's user can read.
//
// A plan holds the stack's configuration and each planned resource's
// inputs and outputs: non-secret values in clear text, secret ones as
// ciphertext of the stack's secrets provider (for the passphrase provider,
// keyed by the passphrase and the stack's salt). An update held to a plan
// decrypts those with the secrets provider of the workspace it runs in, so
// the workspace that previews and the one that applies must hold the same
// key material: see adoptStateSecretsKey.

// experimentalEnv is what the CLI needs in its environment to save or
// follow a plan: update plans are an experimental feature of the CLI.
const experimentalEnv = "PULUMI_EXPERIMENTAL=true"

// usesPlan reports whether CLI arguments save or follow an update plan.
func usesPlan(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--save-plan") || strings.HasPrefix(a, "--plan") {
			return true
		}
	}
	return false
}

// planFile is a plan's file for one CLI run.
type planFile struct {
	dir, path string
}

// newPlanFile makes a private directory for a plan, and writes data into
// it when data is not empty.
func newPlanFile(data []byte) (*planFile, error) {
	dir, err := os.MkdirTemp("", "stackyard-plan-")
	if err != nil {
		return nil, fmt.Errorf("making a directory for the update plan: %w", err)
	}
	f := &planFile{dir: dir, path: filepath.Join(dir, "plan.json")}
	if len(data) > 0 {
		if err := os.WriteFile(f.path, data, 0o600); err != nil {
			f.remove()
			return nil, fmt.Errorf("writing the update plan: %w", err)
		}
	}
	return f, nil
}

// read returns the plan the CLI wrote.
func (f *planFile) read() ([]byte, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("reading the saved update plan: %w", err)
	}
	return data, nil
}

// remove deletes the plan's directory.
func (f *planFile) remove() { _ = os.RemoveAll(f.dir) }

// planViolation matches the detail of the engine's "violates plan" errors,
// e.g. "violates plan: properties changed: ~~content[{old}!={new}]": the
// detail quotes the values the plan and the update disagree on, and the
// planned one of a secret is in clear text there, unknown to the agent's
// redactor when it has changed since.
var planViolation = regexp.MustCompile(`(violates plan: [^:\[\n]*)[^\n]*`)

// withholdPlanValues removes from text the values a "violates plan" error
// quotes, keeping what kind of difference it was.
func withholdPlanValues(text string) string {
	if !strings.Contains(text, "violates plan") {
		return text
	}
	return planViolation.ReplaceAllString(text, "$1 (values withheld)")
}

// secretsProviderState is the part of an exported deployment that says
// how its secrets are encrypted.
type secretsProviderState struct {
	SecretsProviders *struct {
		Type  string `json:"type"`
		State struct {
			// Salt is the passphrase provider's.
			Salt string `json:"salt"`
			// URL and EncryptedKey are a cloud provider's (awskms://,
			// gcpkms://, azurekeyvault://, hashivault://).
			URL          string `json:"url"`
			EncryptedKey string `json:"encryptedkey"`
		} `json:"state"`
	} `json:"secrets_providers"`
}

// adoptStateSecretsKey gives a workspace that holds no key material for
// the selected stack (a fresh project directory: a new pod, a promotion's
// preview Workspace) the key material the stack's state records, instead
// of letting the CLI make new material when configuration is first set.
// Without it each workspace of a stack encrypts with a key of its own, and
// a plan saved in one (whose secret values are ciphertext) cannot be
// followed in another. For the passphrase provider that is the salt
// (encryptionsalt); for a cloud KMS provider, its URL and the data key
// encrypted by it (encryptedkey); the service provider (Pulumi Cloud) is
// keyed by the stack itself and needs nothing. A stack whose state records
// no provider yet (never updated) is left alone. The settings are read
// and written where the CLI keeps them (stackSettingsPath).
func (s *Server) adoptStateSecretsKey(ctx context.Context, ws auto.Workspace, st auto.Stack) error {
	settings, path, err := s.loadStackSettings(ctx, ws, st.Name())
	if err != nil {
		// A file the CLI will complain about itself; never overwrite it.
		s.log.Info("stack settings unreadable; secrets key material left alone", "stack", st.Name(), "error", s.secrets.Redact(err.Error()))
		return nil
	}
	if settings.EncryptionSalt != "" || settings.EncryptedKey != "" {
		return nil
	}
	if s.takeOverKey(st.Name(), settings, path) {
		return nil
	}
	dep, err := exportState(ctx, ws, st.Name())
	if err != nil {
		return err
	}
	if len(dep.Deployment) == 0 {
		return nil
	}
	var state secretsProviderState
	if err := json.Unmarshal(dep.Deployment, &state); err != nil {
		return fmt.Errorf("read exported deployment: %w", err)
	}
	sp := state.SecretsProviders
	switch {
	case sp == nil:
		return nil
	case sp.Type == "passphrase" && sp.State.Salt != "":
		settings.EncryptionSalt = sp.State.Salt
	case sp.Type == "cloud" && sp.State.URL != "" && sp.State.EncryptedKey != "":
		settings.SecretsProvider, settings.EncryptedKey = sp.State.URL, sp.State.EncryptedKey
	default:
		return nil
	}
	if err := settings.Save(path); err != nil {
		return err
	}
	s.log.Info("adopted the secrets key material of the stack's state", "stack", st.Name(), "provider", sp.Type)
	return nil
}
