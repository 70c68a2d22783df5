package kubernetes

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/internal/redact"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

var testBuild = BuildOptions{InitImage: "ghcr.io/stackyard/stackyard:test"}

// baseWorkspace is a restricted Workspace with a git source.
func baseWorkspace() *autov1alpha1.Workspace {
	return &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "team"},
		Spec: autov1alpha1.WorkspaceSpec{
			Git: &autov1alpha1.GitSource{URL: "https://git.example.com/org/repo.git", Ref: "main", Dir: "infra"},
		},
	}
}

func selector(name, key string) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
}

// container returns the named container of pod, or fails.
func container(t *testing.T, pod *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for _, list := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	t.Fatalf("no container %s in %v", name, pod)
	return nil
}

// argAfter returns the argument following flag in args, or "".
func argAfter(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// initRequest decodes the source flags of the init container as `stackyard
// agent init` does, after dropping its other flags.
func initRequest(t *testing.T, init *corev1.Container) source.Request {
	t.Helper()
	var flags []string
	args := init.Args[2:] // agent init
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--copy-agent", "--result-file", "--target":
			i++
		default:
			flags = append(flags, args[i])
		}
	}
	req, err := source.DecodeArgs(flags)
	if err != nil {
		t.Fatalf("decoding the init container's source flags %q: %v", flags, err)
	}
	return req
}

// wantGit checks that the init container fetches want.
func wantGit(t *testing.T, init *corev1.Container, want source.GitRequest) {
	t.Helper()
	if got := initRequest(t, init); got.Git == nil || !reflect.DeepEqual(*got.Git, want) || got.Artifact != nil || got.Project != nil {
		t.Errorf("init fetches %+v (git %+v), want git %+v", got, got.Git, want)
	}
}

func TestBuildStatefulSet(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(ws *autov1alpha1.Workspace)
		check  func(t *testing.T, sts *appsv1.StatefulSet)
	}{
		{
			// What a Stack's workspaceTemplate that sets only the pod's
			// securityContext gives: an empty list of containers, which
			// must leave the runtime's containers alone.
			name: "pod template with an empty containers list",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{
					Containers:      []corev1.Container{},
					SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
				}}
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				container(t, pod, ContainerName)
				container(t, pod, InitContainerName)
				if ptr.Deref(pod.SecurityContext.RunAsUser, 0) != 65532 {
					t.Errorf("pod security context = %+v", pod.SecurityContext)
				}
			},
		},
		{
			// The restricted profile picks the user (1000, that of Pulumi's
			// -nonroot images) but not its name or home: those stay the
			// image's, so an image whose home holds plugins keeps them,
			// and stackyard's agent image answers for any user with its
			// own HOME (writable by all) and USER (internal/image).
			name: "restricted profile leaves HOME and USER to the image",
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				if ptr.Deref(pod.SecurityContext.RunAsUser, 0) != NonRootUser || ptr.Deref(pod.SecurityContext.RunAsGroup, 0) != NonRootUser {
					t.Errorf("pod security context = %+v", pod.SecurityContext)
				}
				for _, c := range []*corev1.Container{container(t, pod, ContainerName), container(t, pod, InitContainerName)} {
					for _, e := range c.Env {
						if e.Name == "HOME" || e.Name == "USER" || e.Name == "PULUMI_HOME" {
							t.Errorf("%s sets %s=%q over the image's", c.Name, e.Name, e.Value)
						}
					}
					if c.SecurityContext.RunAsUser != nil {
						t.Errorf("%s runs as %d, not as the pod", c.Name, *c.SecurityContext.RunAsUser)
					}
				}
			},
		},
		{
			name: "restricted git workspace",
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				main := container(t, pod, ContainerName)
				init := container(t, pod, InitContainerName)
				if main.Image != DefaultImage || init.Image != testBuild.InitImage {
					t.Errorf("images = %s, %s", main.Image, init.Image)
				}
				// The lean agent the init container copied, serving.
				if !slices.Equal(main.Command, []string{"/share/stackyard-agent"}) || len(main.Args) == 0 || main.Args[0] != "serve" {
					t.Errorf("main container runs %q %q, want /share/stackyard-agent serve", main.Command, main.Args)
				}
				if got := argAfter(main.Args, "--workspace"); got != "/share/source/infra" || main.WorkingDir != got {
					t.Errorf("workspace = %s (working dir %s)", got, main.WorkingDir)
				}
				for flag, want := range map[string]string{"--auth": "kubernetes", "--workspace-namespace": "team", "--workspace-name": "ws", "--listen": ":50051"} {
					if got := argAfter(main.Args, flag); got != want {
						t.Errorf("serve %s = %q, want %q", flag, got, want)
					}
				}
				for flag, want := range map[string]string{"--target": "/share/source", "--copy-agent": "/share/stackyard-agent", "--result-file": "/dev/termination-log"} {
					if got := argAfter(init.Args, flag); got != want {
						t.Errorf("init %s = %q, want %q", flag, got, want)
					}
				}
				wantGit(t, init, source.GitRequest{URL: "https://git.example.com/org/repo.git", Branch: "main", Dir: "infra"})
				sc := pod.SecurityContext
				if !ptr.Deref(sc.RunAsNonRoot, false) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || ptr.Deref(sc.RunAsUser, 0) != NonRootUser {
					t.Errorf("pod security context = %+v", sc)
				}
				for _, c := range []*corev1.Container{main, init} {
					csc := c.SecurityContext
					if csc == nil || ptr.Deref(csc.AllowPrivilegeEscalation, true) || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
						t.Errorf("%s security context = %+v", c.Name, csc)
					}
				}
				if main.ReadinessProbe == nil || main.ReadinessProbe.TCPSocket == nil || main.ReadinessProbe.TCPSocket.Port.IntValue() != Port {
					t.Errorf("readiness probe = %+v", main.ReadinessProbe)
				}
				if pod.ServiceAccountName != "default" || *sts.Spec.Replicas != 1 || sts.Spec.ServiceName != "ws-workspace" {
					t.Errorf("sa %s, replicas %d, service %s", pod.ServiceAccountName, *sts.Spec.Replicas, sts.Spec.ServiceName)
				}
				if sts.Spec.Selector.MatchLabels[WorkspaceNameLabel] != "ws" || sts.Spec.Template.Labels[ComponentLabel] != "workspace" {
					t.Errorf("labels = %v / %v", sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels)
				}
			},
		},
		{
			name: "baseline profile with image, env, resources and service account",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.SecurityProfile = autov1alpha1.SecurityProfileBaseline
				ws.Spec.ServiceAccountName = "deployer"
				ws.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: selector("s", "k")}}}
				ws.Spec.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}
				ws.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				main := container(t, pod, ContainerName)
				if main.Image != DefaultBaselineImage || main.SecurityContext != nil || pod.SecurityContext.RunAsNonRoot != nil {
					t.Errorf("baseline: image %s, container sc %+v, pod sc %+v", main.Image, main.SecurityContext, pod.SecurityContext)
				}
				// B comes from a Secret: the agent is told to mask its value.
				if pod.ServiceAccountName != "deployer" || len(main.Env) != 3 || main.Env[1].ValueFrom.SecretKeyRef.Name != "s" ||
					main.Env[2] != (corev1.EnvVar{Name: redact.SecretEnvVar, Value: "B"}) ||
					len(main.EnvFrom) != 1 || main.Resources.Requests.Memory().String() != "1Gi" {
					t.Errorf("main container = %+v", main)
				}
			},
		},
		{
			name: "git credentials as files",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.Git.URL = "git@git.example.com:org/repo.git"
				ws.Spec.Git.Auth = &autov1alpha1.GitAuth{SSHPrivateKey: selector("ssh", "key"), Password: selector("ssh", "passphrase")}
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				init := container(t, pod, InitContainerName)
				wantGit(t, init, source.GitRequest{URL: "git@git.example.com:org/repo.git", Branch: "main", Dir: "infra",
					CredentialFiles: map[source.Credential]string{
						source.CredentialSSHKey:        "/etc/stackyard/git/git-ssh-key",
						source.CredentialSSHPassphrase: "/etc/stackyard/git/git-ssh-passphrase",
					}})
				var vol *corev1.Volume
				for i := range pod.Volumes {
					if pod.Volumes[i].Name == credentialsVolume {
						vol = &pod.Volumes[i]
					}
				}
				if vol == nil || len(vol.Projected.Sources) != 2 || vol.Projected.Sources[1].Secret.Items[0].Key != "passphrase" {
					t.Fatalf("credentials volume = %+v", vol)
				}
				if main := container(t, pod, ContainerName); len(main.VolumeMounts) != 1 {
					t.Errorf("the agent container mounts the credentials: %v", main.VolumeMounts)
				}
			},
		},
		{
			name: "git commit",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.Git.Ref = "0123456789abcdef0123456789abcdef01234567"
				ws.Spec.Git.Shallow = true
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				wantGit(t, container(t, &sts.Spec.Template.Spec, InitContainerName), source.GitRequest{
					URL: "https://git.example.com/org/repo.git", Commit: "0123456789abcdef0123456789abcdef01234567", Dir: "infra", Shallow: true})
			},
		},
		{
			name: "flux source",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.Git = nil
				ws.Spec.Flux = &autov1alpha1.FluxSource{URL: "http://source-controller/a.tar.gz", Digest: "sha256:abc", Dir: "prog"}
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				init := container(t, pod, InitContainerName)
				want := source.ArtifactSpec{URL: "http://source-controller/a.tar.gz", Digest: "sha256:abc", Dir: "prog"}
				if got := initRequest(t, init); got.Artifact == nil || *got.Artifact != want || got.Git != nil {
					t.Errorf("init fetches %+v, want artifact %+v", got, want)
				}
				if got := argAfter(container(t, pod, ContainerName).Args, "--workspace"); got != "/share/source/prog" {
					t.Errorf("workspace = %s", got)
				}
			},
		},
		{
			name: "local source only copies the binary",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.Git = nil
				ws.Spec.Local = &autov1alpha1.LocalSource{Dir: "/app/infra"}
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				if init := container(t, pod, InitContainerName); slices.Contains(init.Args, "--target") {
					t.Errorf("init args = %v", init.Args)
				}
				if got := argAfter(container(t, pod, ContainerName).Args, "--workspace"); got != "/app/infra" {
					t.Errorf("workspace = %s", got)
				}
			},
		},
		{
			name: "pod template merged over the generated pod",
			mutate: func(ws *autov1alpha1.Workspace) {
				ws.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
				ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{
					Metadata: autov1alpha1.EmbeddedObjectMeta{
						Labels:      map[string]string{"team": "infra", WorkspaceNameLabel: "hijack"},
						Annotations: map[string]string{"note": "x"},
					},
					Spec: &corev1.PodSpec{
						NodeSelector: map[string]string{"pool": "ops"},
						Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
						Volumes:      []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
						Containers: []corev1.Container{
							{Name: ContainerName, Env: []corev1.EnvVar{{Name: "B", Value: "2"}},
								VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}},
							{Name: "sidecar", Image: "busybox"},
						},
					},
				}
			},
			check: func(t *testing.T, sts *appsv1.StatefulSet) {
				pod := &sts.Spec.Template.Spec
				main := container(t, pod, ContainerName)
				if main.Image != DefaultImage || len(main.Args) == 0 || main.ReadinessProbe == nil {
					t.Errorf("the merge lost generated fields: %+v", main)
				}
				// A volume named "cache" is the Workspace's cache
				// (cache.go), which adds the package caches' variables.
				var envNames []string
				for _, e := range main.Env {
					if !slices.ContainsFunc(PackageCaches, func(c PackageCache) bool { return c.Env == e.Name }) {
						envNames = append(envNames, e.Name)
					}
				}
				slices.Sort(envNames)
				if !slices.Equal(envNames, []string{"A", "B"}) || len(main.VolumeMounts) != 2 {
					t.Errorf("merged env %v, mounts %v", envNames, main.VolumeMounts)
				}
				if container(t, pod, "sidecar").Image != "busybox" || len(pod.InitContainers) != 1 {
					t.Errorf("containers = %v, init containers = %v", pod.Containers, pod.InitContainers)
				}
				if len(pod.Volumes) != 2 || pod.Volumes[0].EmptyDir == nil || pod.Volumes[1].EmptyDir == nil {
					t.Errorf("volumes = %+v", pod.Volumes)
				}
				if pod.NodeSelector["pool"] != "ops" || len(pod.Tolerations) != 1 || pod.SecurityContext.SeccompProfile == nil {
					t.Errorf("pod = %+v", pod)
				}
				labels := sts.Spec.Template.Labels
				if labels["team"] != "infra" || labels[WorkspaceNameLabel] != "ws" || sts.Spec.Template.Annotations["note"] != "x" {
					t.Errorf("template metadata = %v / %v", labels, sts.Spec.Template.Annotations)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := baseWorkspace()
			if tc.mutate != nil {
				tc.mutate(ws)
			}
			sts, err := BuildStatefulSet(ws, testBuild, 1)
			if err != nil {
				t.Fatalf("BuildStatefulSet: %v", err)
			}
			tc.check(t, sts)
		})
	}
}

func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name, want string
		mutate     func(ws *autov1alpha1.Workspace)
	}{
		{name: "no source", want: "spec:", mutate: func(ws *autov1alpha1.Workspace) { ws.Spec.Git = nil }},
		{name: "relative local dir", want: "spec.local.dir", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Git = nil
			ws.Spec.Local = &autov1alpha1.LocalSource{Dir: "infra"}
		}},
		{name: "pod template container without a name", want: "spec.podTemplate.spec", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{Containers: []corev1.Container{{Image: "x"}}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := baseWorkspace()
			tc.mutate(ws)
			_, err := BuildStatefulSet(ws, testBuild, 1)
			var stalling *reconcile.Stalling
			if !errors.As(err, &stalling) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a Stalling error naming %s", err, tc.want)
			}
		})
	}
}

func TestBuildService(t *testing.T) {
	ws := baseWorkspace()
	ws.Spec.ServiceTemplate = &autov1alpha1.ServiceTemplate{Metadata: &autov1alpha1.EmbeddedObjectMeta{
		Labels: map[string]string{"team": "infra"}, Annotations: map[string]string{"a": "b"},
	}}
	svc := BuildService(ws)
	if svc.Name != "ws-workspace" || svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != Port {
		t.Errorf("service = %+v", svc)
	}
	if svc.Labels["team"] != "infra" || svc.Labels[ComponentLabel] != "workspace" || svc.Annotations["a"] != "b" {
		t.Errorf("metadata = %v / %v", svc.Labels, svc.Annotations)
	}
	if Address(ws) != "ws-workspace.team:50051" {
		t.Errorf("address = %s", Address(ws))
	}
}
