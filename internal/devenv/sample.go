package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// SampleName names the sample repository, Stack and Pulumi project.
const SampleName = "sample"

// Sample is the sample program `stackyard dev` deploys: a git repository
// with a Pulumi YAML project using the test provider, and a Stack tracking
// its main branch.
type Sample struct {
	// RepoDir is the repository's working tree: edit and commit there.
	RepoDir string
	// OutputFile is the file the sample program writes (its "resource").
	OutputFile string
	// BackendDir holds the Pulumi state (file:// backend).
	BackendDir string
}

// sampleProgram writes message to a file and makes a random pet name, so a
// developer sees a deployment happen on their disk.
func sampleProgram(outputFile string) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
description: The sample program of stackyard dev. Edit it, commit, and watch the Stack update.
config:
  message:
    type: string
    default: hello from stackyard
  path:
    type: string
    default: %s
resources:
  greeting:
    type: stackyardtest:index:File
    properties:
      path: ${path}
      content: ${message}
  suffix:
    type: stackyardtest:index:Random
    properties:
      length: 6
outputs:
  file: ${greeting.path}
  sha256: ${greeting.sha256}
  suffix: ${suffix.result}
`, SampleName, outputFile)
}

// PrepareSample creates the sample repository under stateDir on first use
// (a later start keeps the developer's commits) and returns where things
// are.
func PrepareSample(stateDir string) (*Sample, error) {
	s := &Sample{
		RepoDir:    sampleRepoDir(stateDir),
		OutputFile: filepath.Join(stateDir, "sample-output", "greeting.txt"),
		BackendDir: filepath.Join(stateDir, "pulumi-state"),
	}
	if err := os.MkdirAll(s.BackendDir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.RepoDir, ".git")); err == nil {
		return s, nil
	}
	if err := os.MkdirAll(s.RepoDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.RepoDir, "Pulumi.yaml"), []byte(sampleProgram(s.OutputFile)), 0o644); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "Pulumi.yaml"},
		{"commit", "-q", "-m", "The stackyard dev sample program"},
	} {
		if _, err := git(s.RepoDir, args...); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// sampleRepoDir is the sample repository's working tree under stateDir.
func sampleRepoDir(stateDir string) string { return filepath.Join(stateDir, "git", SampleName) }

// EnsureStack creates the sample Stack in the default namespace unless it
// exists, pointing at repoURL.
func (s *Sample) EnsureStack(ctx context.Context, c client.Client, repoURL string) error {
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: SampleName, Namespace: corev1.NamespaceDefault},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   "file://" + s.BackendDir,
			GitSource: &shared.GitSource{ProjectRepo: repoURL, Branch: "main"},
			Config: map[string]apiextensionsv1.JSON{
				SampleName + ":message": {Raw: []byte(`"hello from stackyard dev"`)},
			},
			DestroyOnFinalize: true,
		},
	}
	existing := &pulumiv1.Stack{}
	err := c.Get(ctx, client.ObjectKeyFromObject(stack), existing)
	if err == nil {
		if existing.Spec.GitSource == nil || existing.Spec.ProjectRepo == repoURL {
			return nil
		}
		// The git server moved to another port: follow it.
		existing.Spec.ProjectRepo = repoURL
		return c.Update(ctx, existing)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	return c.Create(ctx, stack)
}
