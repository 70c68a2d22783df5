package kubernetes

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"

	"github.com/stackyard/stackyard/internal/pulumiversion"
	"github.com/stackyard/stackyard/internal/redact"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/runtime"
)

// Names, paths and defaults of the objects built for a Workspace.
const (
	// Port is the agent's gRPC port.
	Port = 50051
	// ContainerName is the agent's container, the one spec.podTemplate
	// addresses to change it.
	ContainerName = "pulumi"
	// InitContainerName is the container that fetches the source.
	InitContainerName = "init"
	// ComponentLabel marks a workspace pod ("workspace"); with
	// WorkspaceNameLabel it selects a Workspace's pod, as in the Pulumi
	// Kubernetes Operator v2.
	ComponentLabel = "auto.pulumi.com/component"
	// WorkspaceNameLabel holds the name of the pod's Workspace.
	WorkspaceNameLabel = "auto.pulumi.com/workspace-name"
	// DefaultImage is the agent image of the restricted profile: the
	// non-root variant of the Pulumi image the operator is tested with.
	DefaultImage = "pulumi/pulumi:" + pulumiversion.Pinned + "-nonroot"
	// DefaultBaselineImage is the agent image of the baseline profile.
	DefaultBaselineImage = "pulumi/pulumi:" + pulumiversion.Pinned
	// NonRootUser is the user (and group) the restricted profile runs as,
	// the one the -nonroot images are built with.
	NonRootUser = 1000

	shareVolume       = "share"
	shareDir          = "/share"
	credentialsVolume = "git-auth"
	credentialsDir    = "/etc/stackyard/git" //nolint:gosec // a directory's name, not a credential
	terminationLog    = "/dev/termination-log"
)

// BuildOptions are the operator-wide settings of the objects built.
type BuildOptions struct {
	// InitImage is the operator's own image, which holds the stackyard
	// binary; required.
	InitImage string
	// InitCommand runs stackyard in InitImage; empty means ["stackyard"],
	// found on the image's PATH.
	InitCommand []string
	// InitImagePullPolicy is the init container's pull policy; empty
	// leaves Kubernetes' default.
	InitImagePullPolicy corev1.PullPolicy
	// Cache configures each Workspace's cache claim (cache.go).
	Cache CacheOptions
	// EphemeralStorageRequest and EphemeralStorageLimit are set on the
	// pod's containers whose spec.resources leave them unset; zero sets
	// none.
	EphemeralStorageRequest, EphemeralStorageLimit resource.Quantity
}

// ObjectName is the name of a Workspace's StatefulSet and Service.
func ObjectName(ws *autov1alpha1.Workspace) string { return ws.Name + "-workspace" }

// Address is where a Workspace's agent serves, through its Service.
func Address(ws *autov1alpha1.Workspace) string {
	return fmt.Sprintf("%s.%s:%d", ObjectName(ws), ws.Namespace, Port)
}

// Labels select a Workspace's pod.
func Labels(ws *autov1alpha1.Workspace) map[string]string {
	return map[string]string{ComponentLabel: "workspace", WorkspaceNameLabel: ws.Name}
}

// BuildService returns the headless Service in front of ws's pod, with the
// labels and annotations of spec.serviceTemplate.
func BuildService(ws *autov1alpha1.Workspace) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ObjectName(ws), Namespace: ws.Namespace, Labels: Labels(ws)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  Labels(ws),
			Ports: []corev1.ServicePort{{
				Name: "grpc", Port: Port, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	if t := ws.Spec.ServiceTemplate; t != nil && t.Metadata != nil {
		svc.Labels = merged(t.Metadata.Labels, Labels(ws))
		svc.Annotations = maps.Clone(t.Metadata.Annotations)
	}
	return svc
}

// BuildStatefulSet returns ws's StatefulSet with the given replica count
// (1 active, 0 idle). It fails, naming the field, when spec.podTemplate
// cannot be merged or the Workspace has no usable source.
func BuildStatefulSet(ws *autov1alpha1.Workspace, opts BuildOptions, replicas int32) (*appsv1.StatefulSet, error) {
	src, err := runtime.SourceOf(ws)
	if err != nil {
		return nil, err
	}
	pod := buildPodSpec(ws, src, opts)
	meta := metav1.ObjectMeta{Labels: Labels(ws)}
	if t := ws.Spec.PodTemplate; t != nil {
		meta.Labels = merged(t.Metadata.Labels, Labels(ws))
		meta.Annotations = maps.Clone(t.Metadata.Annotations)
		if pod, err = mergePodSpec(pod, t.Spec); err != nil {
			return nil, err
		}
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: ObjectName(ws), Namespace: ws.Namespace, Labels: Labels(ws)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(replicas),
			ServiceName:          ObjectName(ws),
			Selector:             &metav1.LabelSelector{MatchLabels: Labels(ws)},
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			RevisionHistoryLimit: ptr.To[int32](2),
			Template:             corev1.PodTemplateSpec{ObjectMeta: meta, Spec: pod},
		},
	}
	addCache(sts, opts.Cache)
	return sts, nil
}

// leanAgent is the agent binary the init container copies into the share
// volume (`agent init --copy-agent`) and the main container runs as
// `serve`: the init image's stackyard-agent, or its stackyard where it has
// none.
const leanAgent = "stackyard-agent"

// buildPodSpec is the generated pod, before spec.podTemplate.
func buildPodSpec(ws *autov1alpha1.Workspace, src runtime.Source, opts BuildOptions) corev1.PodSpec {
	restricted := ws.Spec.SecurityProfile != autov1alpha1.SecurityProfileBaseline
	image := ws.Spec.Image
	if image == "" {
		image = DefaultImage
		if !restricted {
			image = DefaultBaselineImage
		}
	}
	target := path.Join(shareDir, "source")
	projectDir := src.Dir
	if src.NeedsInit() {
		projectDir = path.Join(target, src.Dir)
	}
	shareMount := corev1.VolumeMount{Name: shareVolume, MountPath: shareDir}
	resources := withEphemeralStorage(ws.Spec.Resources, opts.EphemeralStorageRequest, opts.EphemeralStorageLimit)

	agent := path.Join(shareDir, leanAgent)
	initArgs := []string{"agent", "init", "--copy-agent", agent, "--result-file", terminationLog}
	if src.NeedsInit() {
		initArgs = append(initArgs, "--target", target)
		initArgs = append(initArgs, src.InitArgs(credentialFile)...)
	}
	initCmd := opts.InitCommand
	if len(initCmd) == 0 {
		initCmd = []string{"stackyard"}
	}
	initContainer := corev1.Container{
		Name:                     InitContainerName,
		Image:                    opts.InitImage,
		ImagePullPolicy:          opts.InitImagePullPolicy,
		Command:                  initCmd,
		Args:                     initArgs,
		Env:                      slices.Clone(ws.Spec.Env),
		EnvFrom:                  slices.Clone(ws.Spec.EnvFrom),
		Resources:                *resources.DeepCopy(),
		VolumeMounts:             []corev1.VolumeMount{shareMount},
		TerminationMessagePath:   terminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurity(restricted),
	}

	serveArgs := []string{"serve", "--workspace", projectDir, "--listen", ":" + strconv.Itoa(Port),
		"--auth", "kubernetes", "--workspace-namespace", ws.Namespace, "--workspace-name", ws.Name}
	if ws.Spec.PulumiLogLevel > 0 {
		serveArgs = append(serveArgs, "--verbose")
	}
	main := corev1.Container{
		Name:            ContainerName,
		Image:           image,
		ImagePullPolicy: ws.Spec.ImagePullPolicy,
		Command:         []string{agent},
		Args:            serveArgs,
		WorkingDir:      projectDir,
		Env:             agentEnv(ws.Spec.Env),
		EnvFrom:         slices.Clone(ws.Spec.EnvFrom),
		Resources:       resources,
		Ports:           []corev1.ContainerPort{{Name: "grpc", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		VolumeMounts:    []corev1.VolumeMount{shareMount},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}},
			PeriodSeconds:    2,
			FailureThreshold: 3,
		},
		SecurityContext: containerSecurity(restricted),
	}

	sa := ws.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	pod := corev1.PodSpec{
		ServiceAccountName:            sa,
		AutomountServiceAccountToken:  ptr.To(true),
		EnableServiceLinks:            ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To[int64](60),
		SecurityContext:               podSecurity(restricted),
		InitContainers:                []corev1.Container{initContainer},
		Containers:                    []corev1.Container{main},
		Volumes: []corev1.Volume{{
			Name: shareVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		}},
	}
	if len(src.Credentials) > 0 {
		pod.Volumes = append(pod.Volumes, credentialsVolumeOf(src))
		pod.InitContainers[0].VolumeMounts = append(pod.InitContainers[0].VolumeMounts,
			corev1.VolumeMount{Name: credentialsVolume, MountPath: credentialsDir, ReadOnly: true})
	}
	return pod
}

// credentialFile is where the init container reads a credential: the
// file credentialsVolumeOf projects its Secret key to.
func credentialFile(c runtime.Credential) string {
	return path.Join(credentialsDir, c.FileName())
}

// credentialsVolumeOf projects every credential's Secret key to a file
// named after the credential, readable by the pod's group only.
func credentialsVolumeOf(src runtime.Source) corev1.Volume {
	var sources []corev1.VolumeProjection
	for _, c := range src.Credentials {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: c.Secret.LocalObjectReference,
			Items:                []corev1.KeyToPath{{Key: c.Secret.Key, Path: c.FileName()}},
		}})
	}
	return corev1.Volume{Name: credentialsVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr.To[int32](0o440)},
	}}
}

// podSecurity is the pod security context of a profile.
func podSecurity(restricted bool) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if restricted {
		sc.RunAsNonRoot = ptr.To(true)
		sc.RunAsUser = ptr.To[int64](NonRootUser)
		sc.RunAsGroup = ptr.To[int64](NonRootUser)
		sc.FSGroup = ptr.To[int64](NonRootUser)
	}
	return sc
}

// containerSecurity is the container security context of a profile:
// nothing beyond the pod's for baseline; no privilege escalation and no
// capabilities for restricted.
func containerSecurity(restricted bool) *corev1.SecurityContext {
	if !restricted {
		return nil
	}
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
	}
}

// merged returns extra with base's entries on top (base wins).
func merged(extra, base map[string]string) map[string]string {
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, base)
	return out
}

// agentEnv is the agent container's environment: the Workspace's, and
// redact.SecretEnvVar naming the variables read from Secret keys, whose
// values the agent then masks. (Keys of envFrom Secrets are only known in
// the pod; the agent does not learn them.)
func agentEnv(env []corev1.EnvVar) []corev1.EnvVar {
	out := slices.Clone(env)
	var names []string
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			names = append(names, e.Name)
		}
	}
	if len(names) > 0 {
		out = append(out, corev1.EnvVar{Name: redact.SecretEnvVar, Value: redact.EncodeSecretEnv(names)})
	}
	return out
}
