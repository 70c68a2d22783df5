//go:build cluster

package cluster_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/stackyard/stackyard/internal/image"
	kubernetesruntime "github.com/stackyard/stackyard/internal/runtime/kubernetes"
)

// pulumiStyleImage builds, from the agent image `make images` wrote, a
// workspace image laid out like Pulumi's own -nonroot images: a user
// pulumi, 1000 (the restricted profile's), in /etc/passwd with a home of
// its own (/home/pulumi, 0755, owned by it), HOME left for the container
// runtime to set from /etc/passwd and no USER. It imports the image into
// the node's containerd and returns its name.
func pulumiStyleImage(t *testing.T, img images) string {
	t.Helper()
	base := agentImageOf(t)
	uid := kubernetesruntime.NonRootUser
	layer, err := image.NewLayer([]image.Entry{
		image.File("/etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\npulumi:x:%d:%d:pulumi:/home/pulumi:/sbin/nologin\n", uid, uid)),
		image.File("/etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\npulumi:x:%d:\n", uid)),
		image.Dir("/home/pulumi", 0o755, uid, uid),
	}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	withUser, err := mutate.Append(base, mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := *cf.Config.DeepCopy()
	cfg.User = fmt.Sprintf("%d:%d", uid, uid)
	cfg.WorkingDir = "/home/pulumi"
	cfg.Env = nil
	for _, e := range cf.Config.Env {
		if !strings.HasPrefix(e, "HOME=") && !strings.HasPrefix(e, "USER=") {
			cfg.Env = append(cfg.Env, e)
		}
	}
	styled, err := mutate.Config(withUser, cfg)
	if err != nil {
		t.Fatal(err)
	}

	return importImage(t, "stackyard.test/pulumi-style-agent:"+img.tag, styled)
}

// agentImageOf is the agent image `make images` built, from its OCI layout.
func agentImageOf(t *testing.T) v1.Image {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(repoRoot(t), "dist", "images", "stackyard-agent.oci"))
	if err != nil {
		t.Fatalf("the agent image's OCI layout (make images): %v", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("the agent image's layout should hold one image: %v", err)
	}
	base, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// importImage imports im, tagged ref, into the node's containerd, and
// returns ref.
func importImage(t *testing.T, ref string, im v1.Image) string {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	if err := tarball.WriteToFile(tarPath, tag, im); err != nil {
		t.Fatal(err)
	}
	ctr := exec.Command(filepath.Join(repoRoot(t), "bin", "ctr"), "--address", filepath.Join(clusterDir(), "run", "containerd.sock"),
		"-n", "k8s.io", "images", "import", tarPath)
	if out, err := ctr.CombinedOutput(); err != nil {
		t.Fatalf("importing %s into the node's containerd: %v\n%s", ref, err, out)
	}
	return ref
}
