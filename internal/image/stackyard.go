package image

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Paths and identities inside the stackyard images.
const (
	// NonRootUID is the user (and group) both images run as: "nonroot",
	// 65532 as in distroless images.
	NonRootUID = 65532
	// HomeDir is nonroot's home directory and every user's HOME: the
	// Pulumi CLI keeps its state in HomeDir/.pulumi. It is writable by
	// any user (mode 1777, like /tmp), because a pod's runAsUser may be
	// another user than nonroot: the Kubernetes runtime's restricted
	// profile runs workspace pods as 1000, the user of Pulumi's -nonroot
	// images.
	HomeDir = "/home/nonroot"
	// UserName is the USER both images set, so that a program asking who
	// it runs as (Go's os/user without cgo, as in the pulumi CLI) gets an
	// answer for a user /etc/passwd does not list.
	UserName = "nonroot"
	// BinDir holds every executable, and comes first on PATH.
	BinDir = "/usr/local/bin"
	// StackyardPath is the stackyard binary, both images' entrypoint.
	StackyardPath = BinDir + "/stackyard"
	// StackyardAgentPath is the lean agent binary (cmd/stackyard-agent),
	// beside stackyard in both images: the init container of a workspace
	// pod copies it for the agent to run, and the local runtime starts its
	// agents from it.
	StackyardAgentPath = BinDir + "/stackyard-agent"
	// CACertificatesPath is the CA bundle, where Go, OpenSSL and most
	// other TLS clients on Linux look for it.
	CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"
)

// Inputs are the files and facts the stackyard images are built from. The
// same inputs give the same digests.
type Inputs struct {
	// Stackyard, StackyardAgent, Pulumi and PulumiLanguageYAML are the
	// build machine's binaries to put in the images (linux, Arch,
	// statically linked). Stackyard and StackyardAgent must come from one
	// build: the local runtime runs the lean agent only when it is the
	// same build as stackyard.
	Stackyard, StackyardAgent, Pulumi, PulumiLanguageYAML string
	// CACertificates is the build machine's CA bundle, copied as is.
	CACertificates string
	// Arch is the images' architecture, as GOARCH spells it.
	Arch string
	// Created is the images' creation time (not the files' times, which
	// are always the Unix epoch).
	Created time.Time
	// Version, Revision and Source are recorded as the OCI labels
	// org.opencontainers.image.version, .revision and .source.
	Version, Revision, Source string
	// PulumiVersion is the pinned CLI's version, for the agent image's
	// description only; may be empty.
	PulumiVersion string
	// Scratch is a directory for the compressed layers, which must
	// outlive every use of the images.
	Scratch string
}

// Images are the two stackyard images built from one Inputs.
type Images struct {
	// Operator runs `stackyard operator`; it also serves as the
	// Kubernetes runtime's init image, which runs `stackyard agent init`.
	Operator v1.Image
	// Agent is a workspace image: Operator plus pulumi and the YAML
	// language host.
	Agent v1.Image
}

// Build assembles both images from in.
func Build(in Inputs) (Images, error) {
	if in.Stackyard == "" || in.StackyardAgent == "" || in.Pulumi == "" || in.PulumiLanguageYAML == "" || in.CACertificates == "" {
		return Images{}, errors.New("image inputs: the stackyard, stackyard-agent, pulumi, pulumi-language-yaml and CA certificate files are required")
	}
	if in.Arch == "" || in.Scratch == "" {
		return Images{}, errors.New("image inputs: Arch and Scratch are required")
	}
	base, err := NewLayer(baseEntries(in.CACertificates), in.Scratch)
	if err != nil {
		return Images{}, fmt.Errorf("base layer: %w", err)
	}
	stackyard, err := NewLayer([]Entry{
		FileFrom(StackyardPath, 0o755, in.Stackyard),
		FileFrom(StackyardAgentPath, 0o755, in.StackyardAgent),
	}, in.Scratch)
	if err != nil {
		return Images{}, fmt.Errorf("stackyard layer: %w", err)
	}
	tools, err := NewLayer([]Entry{
		FileFrom(BinDir+"/pulumi", 0o755, in.Pulumi),
		FileFrom(BinDir+"/pulumi-language-yaml", 0o755, in.PulumiLanguageYAML),
	}, in.Scratch)
	if err != nil {
		return Images{}, fmt.Errorf("pulumi layer: %w", err)
	}
	operatorLayers := []Layer{
		{Layer: base, CreatedBy: "stackyard base: CA certificates, /etc/passwd and /etc/group (nonroot 65532), " + HomeDir + ", /tmp"},
		{Layer: stackyard, CreatedBy: withVersion("stackyard", in.Version) + ": " + StackyardPath + ", " + StackyardAgentPath},
	}
	agentLayers := append(operatorLayers[:len(operatorLayers):len(operatorLayers)],
		Layer{Layer: tools, CreatedBy: withVersion("pulumi", in.PulumiVersion) + " and pulumi-language-yaml: " + BinDir})

	var imgs Images
	if imgs.Operator, err = Assemble(operatorConfig(in), operatorLayers); err != nil {
		return Images{}, fmt.Errorf("operator image: %w", err)
	}
	if imgs.Agent, err = Assemble(agentConfig(in), agentLayers); err != nil {
		return Images{}, fmt.Errorf("agent image: %w", err)
	}
	return imgs, nil
}

// baseEntries are the files both images share: the CA bundle, the user
// database for nonroot, a home and a /tmp that every user can write to.
func baseEntries(caCertificates string) []Entry {
	return []Entry{
		File("/etc/passwd", 0o644, []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n"+
				fmt.Sprintf("nonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", NonRootUID, NonRootUID, HomeDir))),
		File("/etc/group", 0o644, []byte(
			"root:x:0:\n"+
				fmt.Sprintf("nonroot:x:%d:\n", NonRootUID))),
		// Without it glibc-based tools added on top would skip /etc/hosts.
		File("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n")),
		FileFrom(CACertificatesPath, 0o644, caCertificates),
		Dir("/root", 0o700, 0, 0),
		Dir(HomeDir, fs.ModeSticky|0o777, NonRootUID, NonRootUID),
		Dir("/tmp", fs.ModeSticky|0o777, 0, 0),
		Dir(BinDir, 0o755, 0, 0),
	}
}

// withVersion is "name version", or name alone when version is unknown.
func withVersion(name, version string) string {
	if version == "" {
		return name
	}
	return name + " " + version
}

// commonLabels are the OCI labels both images carry.
func commonLabels(in Inputs, title, description string) map[string]string {
	labels := map[string]string{AnnotationTitle: title, AnnotationDescription: description}
	for k, v := range map[string]string{
		AnnotationVersion: in.Version, AnnotationRevision: in.Revision, AnnotationSource: in.Source,
	} {
		if v != "" {
			labels[k] = v
		}
	}
	return labels
}

// env is both images' environment. HOME and USER are set whoever the
// container runs as: without cgo, Go's os/user answers for a user missing
// from /etc/passwd only from $USER and $HOME.
func env() []string {
	return []string{
		"PATH=" + BinDir + ":/usr/bin:/bin",
		"HOME=" + HomeDir,
		"USER=" + UserName,
		"SSL_CERT_FILE=" + CACertificatesPath,
	}
}

// operatorConfig runs `stackyard operator` as nonroot.
func operatorConfig(in Inputs) Config {
	return Config{
		Arch:       in.Arch,
		Created:    in.Created,
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
		Entrypoint: []string{StackyardPath},
		Cmd:        []string{"operator"},
		Env:        env(),
		WorkingDir: HomeDir,
		Labels: commonLabels(in, "stackyard-operator",
			"The stackyard operator, which deploys Pulumi stacks on Kubernetes; also the workspace pods' init image."),
	}
}

// agentConfig runs stackyard (its usage, unless arguments say otherwise)
// as nonroot, with pulumi on PATH.
func agentConfig(in Inputs) Config {
	desc := "A stackyard workspace (agent) image: stackyard, the " +
		withVersion("pulumi", in.PulumiVersion) + " CLI and the YAML language host."
	return Config{
		Arch:       in.Arch,
		Created:    in.Created,
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
		Entrypoint: []string{StackyardPath},
		Env:        append(env(), "PULUMI_SKIP_UPDATE_CHECK=true"),
		WorkingDir: HomeDir,
		Labels:     commonLabels(in, "stackyard-agent", desc),
	}
}
