package kubernetes

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

func TestCache(t *testing.T) {
	withCache := testBuild
	withCache.Cache = CacheOptions{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To("fast")}
	emptyDir := func(ws *autov1alpha1.Workspace) {
		ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: CacheVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}
	}
	sharedClaim := func(ws *autov1alpha1.Workspace) {
		ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: CacheVolume, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "team-cache"},
			}}},
			Containers: []corev1.Container{{Name: ContainerName, VolumeMounts: []corev1.VolumeMount{{Name: CacheVolume, MountPath: "/var/cache/pulumi/"}}}},
		}}
	}
	for _, tc := range []struct {
		name      string
		opts      BuildOptions
		edit      func(*autov1alpha1.Workspace)
		wantClaim bool
		wantDir   string // --cache-dir, "" for none
		wantMax   string // --cache-max-bytes, "" for none
	}{
		{name: "operator claims off, no volume", opts: testBuild},
		{name: "a claim per Workspace", opts: withCache, wantClaim: true, wantDir: "/cache", wantMax: "858993440"},
		{name: "opted out with an emptyDir", opts: withCache, edit: emptyDir, wantDir: "/cache"},
		{name: "a shared claim mounted elsewhere", opts: withCache, edit: sharedClaim, wantDir: "/var/cache/pulumi"},
		{name: "a shared claim with operator claims off", opts: testBuild, edit: sharedClaim, wantDir: "/var/cache/pulumi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := baseWorkspace()
			if tc.edit != nil {
				tc.edit(ws)
			}
			sts, err := BuildStatefulSet(ws, tc.opts, 1)
			if err != nil {
				t.Fatal(err)
			}
			main := container(t, &sts.Spec.Template.Spec, ContainerName)
			if got := argAfter(main.Args, "--cache-dir"); got != tc.wantDir {
				t.Errorf("--cache-dir %q, want %q (args %q)", got, tc.wantDir, main.Args)
			}
			if got := argAfter(main.Args, "--cache-max-bytes"); got != tc.wantMax {
				t.Errorf("--cache-max-bytes %q, want %q", got, tc.wantMax)
			}
			mounts := 0
			for _, m := range main.VolumeMounts {
				if m.Name == CacheVolume {
					mounts++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantDir != ""]; mounts != want {
				t.Errorf("%d mounts of the cache volume, want %d: %v", mounts, want, main.VolumeMounts)
			}
			if init := container(t, &sts.Spec.Template.Spec, InitContainerName); len(init.VolumeMounts) != 1 {
				t.Errorf("the init container mounts %v; the cache is the agent's alone", init.VolumeMounts)
			}
			own := ownCacheVolume(sts)
			if len(sts.Spec.VolumeClaimTemplates) != 0 || sts.Spec.PersistentVolumeClaimRetentionPolicy != nil {
				t.Errorf("claim templates %v %v: the runtime makes the claim itself", sts.Spec.VolumeClaimTemplates, sts.Spec.PersistentVolumeClaimRetentionPolicy)
			}
			if (own != nil) != tc.wantClaim {
				t.Errorf("a volume for the runtime's claim: %v, want %v (volumes %v)", own != nil, tc.wantClaim, sts.Spec.Template.Spec.Volumes)
			}
			if !tc.wantClaim {
				return
			}
			claim := cacheClaim(ws, tc.opts.Cache)
			if claim.Name != "" || claim.GenerateName != ObjectName(ws)+"-cache-" || *claim.Spec.StorageClassName != "fast" ||
				claim.Spec.Resources.Requests.Storage().String() != "1Gi" ||
				len(claim.Spec.AccessModes) != 1 || claim.Spec.AccessModes[0] != corev1.ReadWriteOnce {
				t.Errorf("claim %+v", claim)
			}
		})
	}
}

func TestEphemeralStorageDefaults(t *testing.T) {
	q := resource.MustParse
	opts := testBuild
	opts.EphemeralStorageRequest, opts.EphemeralStorageLimit = q("1Gi"), q("8Gi")
	for _, tc := range []struct {
		name             string
		user             corev1.ResourceRequirements
		wantReq, wantLim string
	}{
		{name: "defaults", wantReq: "1Gi", wantLim: "8Gi"},
		{name: "the user's own win", wantReq: "2Gi", wantLim: "3Gi", user: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: q("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceEphemeralStorage: q("3Gi")},
		}},
		{name: "a user's limit under the default request", wantReq: "512Mi", wantLim: "512Mi", user: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: q("512Mi")},
		}},
		{name: "a user's request over the default limit", wantReq: "20Gi", wantLim: "20Gi", user: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: q("20Gi")},
		}},
		{name: "other resources stay", wantReq: "1Gi", wantLim: "8Gi", user: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := baseWorkspace()
			ws.Spec.Resources = *tc.user.DeepCopy()
			sts, err := BuildStatefulSet(ws, opts, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{InitContainerName, ContainerName} {
				r := container(t, &sts.Spec.Template.Spec, name).Resources
				if got := r.Requests[corev1.ResourceEphemeralStorage]; got.String() != tc.wantReq {
					t.Errorf("%s: request %s, want %s", name, got.String(), tc.wantReq)
				}
				if got := r.Limits[corev1.ResourceEphemeralStorage]; got.String() != tc.wantLim {
					t.Errorf("%s: limit %s, want %s", name, got.String(), tc.wantLim)
				}
				if cpu, ok := tc.user.Requests[corev1.ResourceCPU]; ok && !r.Requests.Cpu().Equal(cpu) {
					t.Errorf("%s: the user's cpu request was lost: %v", name, r.Requests)
				}
			}
			if got := ws.Spec.Resources; len(got.Requests) != len(tc.user.Requests) || len(got.Limits) != len(tc.user.Limits) {
				t.Errorf("the Workspace's own resources were changed: %v", got)
			}
		})
	}
	t.Run("none set when the operator sets none", func(t *testing.T) {
		sts, err := BuildStatefulSet(baseWorkspace(), testBuild, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := container(t, &sts.Spec.Template.Spec, ContainerName).Resources; len(r.Requests)+len(r.Limits) != 0 {
			t.Errorf("resources %v", r)
		}
	})
}

// TestWaitingMessageUnscheduled: a pod the scheduler cannot place (an
// unbound cache claim) says why in the Workspace's message.
func TestWaitingMessageUnscheduled(t *testing.T) {
	sts := &appsv1.StatefulSet{}
	sts.Name = "ws-workspace"
	pod := &corev1.Pod{}
	pod.Name = "ws-workspace-0"
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
	}}
	got := waitingMessage(sts, pod)
	if want := "waiting for pod ws-workspace-0: not scheduled: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// TestPackageCacheEnv: with a cache, the package managers' download
// caches point into it, except where the Workspace sets one itself.
func TestPackageCacheEnv(t *testing.T) {
	opts := testBuild
	opts.Cache = CacheOptions{Size: resource.MustParse("1Gi")}
	ws := baseWorkspace()
	ws.Spec.Env = []corev1.EnvVar{{Name: "GOCACHE", Value: "/tmp/go-build"}}
	sts, err := BuildStatefulSet(ws, opts, 1)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string][]string{}
	for _, e := range container(t, &sts.Spec.Template.Spec, ContainerName).Env {
		env[e.Name] = append(env[e.Name], e.Value)
	}
	for _, c := range PackageCaches {
		want := "/cache/packages/" + c.Dir
		if c.Env == "GOCACHE" {
			want = "/tmp/go-build"
		}
		if got := env[c.Env]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %v, want %s", c.Env, got, want)
		}
	}
	off, err := BuildStatefulSet(baseWorkspace(), testBuild, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range container(t, &off.Spec.Template.Spec, ContainerName).Env {
		if e.Name == "npm_config_cache" {
			t.Errorf("without a cache volume, %s is set", e.Name)
		}
	}
}
