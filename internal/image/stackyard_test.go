package image

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestBuildIsReproducible(t *testing.T) {
	in := fixtureInputs(t)
	first := mustBuild(t, in)
	in.Scratch = t.TempDir()
	second := mustBuild(t, in)
	for name, pair := range map[string][2]v1.Image{
		"operator": {first.Operator, second.Operator},
		"agent":    {first.Agent, second.Agent},
	} {
		a, _ := pair[0].RawManifest()
		b, _ := pair[1].RawManifest()
		if string(a) != string(b) {
			t.Errorf("%s: manifests differ between two builds of the same inputs:\n%s\n%s", name, a, b)
		}
	}
}

func TestBuildDigestFollowsInputs(t *testing.T) {
	base := fixtureInputs(t)
	ref := mustBuild(t, base)
	refLayers := layerDigests(t, ref.Agent)

	for name, tc := range map[string]struct {
		change func(in *Inputs)
		// sameLayers are the indexes of the agent's layers (base,
		// stackyard, pulumi) the change must leave alone.
		sameLayers []int
	}{
		"stackyard binary": {func(in *Inputs) { in.Stackyard = in.PulumiLanguageYAML }, []int{0, 2}},
		"agent binary":     {func(in *Inputs) { in.StackyardAgent = in.PulumiLanguageYAML }, []int{0, 2}},
		"pulumi binary":    {func(in *Inputs) { in.Pulumi = in.Stackyard }, []int{0, 1}},
		"CA bundle":        {func(in *Inputs) { in.CACertificates = in.Stackyard }, []int{1, 2}},
		"version":          {func(in *Inputs) { in.Version = "v1.2.4" }, []int{0, 1, 2}},
		"revision":         {func(in *Inputs) { in.Revision = strings.Repeat("f", 40) }, []int{0, 1, 2}},
		// The creation time is metadata only: no layer holds it.
		"created": {func(in *Inputs) { in.Created = in.Created.Add(time.Second) }, []int{0, 1, 2}},
		"arch":    {func(in *Inputs) { in.Arch = "arm64" }, []int{0, 1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			in := base
			in.Scratch = t.TempDir()
			tc.change(&in)
			got := mustBuild(t, in)
			if digest(t, got.Agent) == digest(t, ref.Agent) {
				t.Errorf("agent digest unchanged")
			}
			// Only the agent holds pulumi.
			opChanged := digest(t, got.Operator) != digest(t, ref.Operator)
			if want := name != "pulumi binary"; opChanged != want {
				t.Errorf("operator digest changed: %v, want %v", opChanged, want)
			}
			layers := layerDigests(t, got.Agent)
			for i := range layers {
				if same := layers[i] == refLayers[i]; same != slices.Contains(tc.sameLayers, i) {
					t.Errorf("layer %d unchanged: %v, want %v", i, same, !same)
				}
			}
		})
	}
}

func TestBuildConfig(t *testing.T) {
	in := fixtureInputs(t)
	imgs := mustBuild(t, in)
	for name, tc := range map[string]struct {
		img   v1.Image
		title string
		cmd   []string
	}{
		"operator": {imgs.Operator, "stackyard-operator", []string{"operator"}},
		"agent":    {imgs.Agent, "stackyard-agent", nil},
	} {
		t.Run(name, func(t *testing.T) {
			if mt, _ := tc.img.MediaType(); mt != types.OCIManifestSchema1 {
				t.Errorf("manifest media type %s", mt)
			}
			m, err := tc.img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.Config.MediaType != types.OCIConfigJSON {
				t.Errorf("config media type %s", m.Config.MediaType)
			}
			for _, l := range m.Layers {
				if l.MediaType != types.OCILayer {
					t.Errorf("layer media type %s", l.MediaType)
				}
			}
			cf, err := tc.img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if uid, _, _ := strings.Cut(c.User, ":"); uid == "" || uid == "0" || uid == "root" || c.User != "65532:65532" {
				t.Errorf("User %q, want 65532:65532", c.User)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(in.Created) {
				t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
			}
			if !slices.Equal(c.Entrypoint, []string{StackyardPath}) || !slices.Equal(c.Cmd, tc.cmd) {
				t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
			}
			if !slices.Contains(c.Env, "HOME="+HomeDir) || !slices.Contains(c.Env, "USER=nonroot") ||
				!slices.Contains(c.Env, "PATH=/usr/local/bin:/usr/bin:/bin") {
				t.Errorf("env %q", c.Env)
			}
			if c.WorkingDir != HomeDir {
				t.Errorf("working dir %q", c.WorkingDir)
			}
			want := map[string]string{
				AnnotationCreated:  "2026-01-02T03:04:05Z",
				AnnotationVersion:  in.Version,
				AnnotationRevision: in.Revision,
				AnnotationSource:   in.Source,
				AnnotationTitle:    tc.title,
			}
			for k, v := range want {
				if c.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
				}
				if m.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
				}
			}
			if c.Labels[AnnotationDescription] == "" {
				t.Errorf("no description label")
			}
			for _, h := range cf.History {
				if !h.Created.Equal(in.Created) || h.CreatedBy == "" {
					t.Errorf("history %+v", h)
				}
			}
		})
	}
}

func TestBuildFiles(t *testing.T) {
	in := fixtureInputs(t)
	imgs := mustBuild(t, in)
	ca, err := os.ReadFile(in.CACertificates)
	if err != nil {
		t.Fatal(err)
	}
	op, agent := imageFiles(t, imgs.Operator), imageFiles(t, imgs.Agent)

	for name, files := range map[string]map[string]tarEntry{"operator": op, "agent": agent} {
		for p, e := range files {
			if base := path.Base(p); base == "sh" || base == "bash" || base == "busybox" {
				t.Errorf("%s: holds a shell at %s", name, p)
			}
			if !e.hdr.ModTime.Equal(epoch) {
				t.Errorf("%s: %s has mtime %v", name, p, e.hdr.ModTime)
			}
			if e.hdr.Uid != 0 && p != "home/nonroot/" {
				t.Errorf("%s: %s is owned by %d", name, p, e.hdr.Uid)
			}
		}
		checks := map[string]func(e tarEntry) bool{
			"usr/local/bin/stackyard":           func(e tarEntry) bool { return e.hdr.Mode == 0o755 && e.content == "stackyard binary\n" },
			"usr/local/bin/stackyard-agent":     func(e tarEntry) bool { return e.hdr.Mode == 0o755 && e.content == "lean agent binary\n" },
			"etc/ssl/certs/ca-certificates.crt": func(e tarEntry) bool { return e.hdr.Mode == 0o644 && e.content == string(ca) },
			// Writable by whichever user a pod runs the image as.
			"home/nonroot/": func(e tarEntry) bool {
				return e.hdr.Uid == NonRootUID && e.hdr.Gid == NonRootUID && e.hdr.Mode == 0o1777
			},
			"tmp/": func(e tarEntry) bool { return e.hdr.Mode == 0o1777 },
			"etc/passwd": func(e tarEntry) bool {
				return strings.Contains(e.content, "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
			},
			"etc/group": func(e tarEntry) bool { return strings.Contains(e.content, "\nnonroot:x:65532:\n") },
		}
		for p, ok := range checks {
			if e, found := files[p]; !found || !ok(e) {
				t.Errorf("%s: %s missing or wrong: %+v", name, p, e.hdr)
			}
		}
	}

	for _, p := range []string{"usr/local/bin/pulumi", "usr/local/bin/pulumi-language-yaml"} {
		if _, found := op[p]; found {
			t.Errorf("operator: holds %s", p)
		}
		if e, found := agent[p]; !found || e.hdr.Mode != 0o755 {
			t.Errorf("agent: %s missing or not executable", p)
		}
	}
	// The agent image is the operator image plus one layer.
	if got, want := layerDigests(t, imgs.Agent)[:2], layerDigests(t, imgs.Operator); !slices.Equal(got, want) {
		t.Errorf("agent layers %v do not start with the operator's %v", got, want)
	}
}

func TestBuildRequiresInputs(t *testing.T) {
	in := fixtureInputs(t)
	in.Pulumi = ""
	if _, err := Build(in); err == nil {
		t.Error("built without a pulumi binary")
	}
	in = fixtureInputs(t)
	in.StackyardAgent = ""
	if _, err := Build(in); err == nil {
		t.Error("built without a stackyard-agent binary")
	}
	in = fixtureInputs(t)
	in.Scratch = ""
	if _, err := Build(in); err == nil {
		t.Error("built without a scratch directory")
	}
}
