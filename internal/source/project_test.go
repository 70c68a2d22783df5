package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteProject(t *testing.T) {
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(target, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := WriteProject(ctx, target, ProjectSpec{Name: "true", Runtime: "nodejs"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dir != target {
		t.Errorf("Dir = %s, want %s", res.Dir, target)
	}
	if got, want := readFile(t, target, "Pulumi.yaml"), "name: \"true\"\nruntime: \"nodejs\"\n"; got != want {
		t.Errorf("Pulumi.yaml = %q, want %q", got, want)
	}
	entries, _ := os.ReadDir(target)
	if len(entries) != 1 {
		t.Errorf("target holds %d entries, want only Pulumi.yaml", len(entries))
	}

	for _, tt := range []struct {
		name string
		spec ProjectSpec
	}{
		{"empty name", ProjectSpec{Runtime: "yaml"}},
		{"space", ProjectSpec{Name: "my app", Runtime: "yaml"}},
		{"slash", ProjectSpec{Name: "a/b", Runtime: "yaml"}},
		{"dot-dot", ProjectSpec{Name: "..", Runtime: "yaml"}},
		{"newline", ProjectSpec{Name: "a\nruntime: evil", Runtime: "yaml"}},
		{"too long", ProjectSpec{Name: strings.Repeat("a", 101), Runtime: "yaml"}},
		{"empty runtime", ProjectSpec{Name: "app"}},
		{"bad runtime", ProjectSpec{Name: "app", Runtime: "node js"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WriteProject(ctx, target, tt.spec)
			if e := wantReason(t, err, ReasonInvalidSpec); !e.Permanent {
				t.Errorf("InvalidSpec should be permanent")
			}
			if got := readFile(t, target, "Pulumi.yaml"); !strings.Contains(got, `"true"`) {
				t.Errorf("failed write changed the target: %q", got)
			}
		})
	}
}

func TestStageRejectsFileTarget(t *testing.T) {
	target := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := WriteProject(context.Background(), target, ProjectSpec{Name: "app", Runtime: "yaml"})
	wantReason(t, err, ReasonInvalidSpec)
	_, err = WriteProject(context.Background(), "", ProjectSpec{Name: "app", Runtime: "yaml"})
	wantReason(t, err, ReasonInvalidSpec)
}
