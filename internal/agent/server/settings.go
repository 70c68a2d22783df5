package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/diag/colors"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

// stackSettingsPath returns where the CLI keeps stack's settings, as
// workspace.DetectProjectStackPath finds them (which works from the
// process's directory, not the agent's project directory):
// Pulumi.<stack name> with the project file's extension, under the
// project's stackConfigDir when it names one. The Automation API's
// StackSettings and SaveStackSettings only know Pulumi.<stack>.yaml beside
// the project file.
func (s *Server) stackSettingsPath(ctx context.Context, ws auto.Workspace, stack string) (*workspace.Project, string, error) {
	proj, err := ws.ProjectSettings(ctx)
	if err != nil {
		return nil, "", err
	}
	ext := ".yaml"
	for _, name := range projectFiles {
		if _, err := os.Stat(filepath.Join(s.opts.WorkDir, name)); err == nil {
			ext = filepath.Ext(name)
			break
		}
	}
	name := "Pulumi." + stack[strings.LastIndex(stack, "/")+1:] + ext
	return proj, filepath.Join(s.opts.WorkDir, proj.StackConfigDir, name), nil
}

// loadStackSettings reads stack's settings from where the CLI keeps them,
// and returns them with that path; a stack without a settings file yet (a
// backend whose stacks need none) has empty settings.
func (s *Server) loadStackSettings(ctx context.Context, ws auto.Workspace, stack string) (*workspace.ProjectStack, string, error) {
	proj, path, err := s.stackSettingsPath(ctx, ws, stack)
	if err != nil {
		return nil, "", err
	}
	// What the CLI would warn about the file (a deprecated key, say) goes to
	// the agent's own log, as the CLI would print it.
	sink := diag.DefaultSink(os.Stderr, os.Stderr, diag.FormatOptions{Color: colors.Never})
	ps, err := workspace.LoadProjectStack(sink, proj, path)
	if err != nil {
		return nil, "", err
	}
	return ps, path, nil
}
