package kubernetes

import (
	"path"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// The workspace cache: a volume named CacheVolume, mounted in the agent's
// container at cacheDir, where the agent keeps what `pulumi install`
// fetches (provider plugins) across pods. By default it is a
// PersistentVolumeClaim the runtime makes for the Workspace (bindCacheClaim),
// controlled by it, under a name the API server generates, so that nobody
// can make one first with content of their choosing; its name and UID are
// recorded on the StatefulSet (CacheClaimAnnotation), which only the
// operator writes. It outlives the pod when the Workspace idles and goes
// with the Workspace. A Workspace whose spec.podTemplate declares a volume
// of that name uses that volume instead: a claim several Workspaces share,
// or an emptyDir to opt out.
const (
	// CacheVolume is the name of the cache volume.
	CacheVolume = "cache"
	// CacheClaimAnnotation, on a Workspace's StatefulSet, records the
	// cache claim the runtime made for it, as "<name>/<uid>".
	CacheClaimAnnotation = "stackyard.dev/cache-claim"
	cacheDir             = "/cache"
	// cacheBudgetPercent is the share of the claim's size the agent keeps
	// its cache within, leaving room for an install in progress.
	cacheBudgetPercent = 80
)

// CacheOptions configure the workspace cache's claims.
type CacheOptions struct {
	// Size is each claim's storage request; zero turns the cache off for
	// the Workspaces that do not bring their own cache volume.
	Size resource.Quantity
	// StorageClassName is the claims' storage class; nil leaves it to the
	// cluster's default class.
	StorageClassName *string
}

// enabled reports whether the operator makes cache claims.
func (c CacheOptions) enabled() bool { return !c.Size.IsZero() }

// budget is the size the agent keeps a claim's content within, in bytes.
func (c CacheOptions) budget() int64 { return c.Size.Value() / 100 * cacheBudgetPercent }

// addCache gives the StatefulSet its cache: the user's volume named
// CacheVolume if the pod has one (a size budget is then the user's
// business), else a claim template when the operator makes claims, else
// nothing. The agent's container mounts it and the agent is told where.
func addCache(sts *appsv1.StatefulSet, opts CacheOptions) {
	pod := &sts.Spec.Template.Spec
	own := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == CacheVolume })
	if !own && !opts.enabled() {
		return
	}
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == ContainerName })
	if i < 0 {
		return
	}
	main := &pod.Containers[i]
	if !slices.ContainsFunc(main.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == CacheVolume }) {
		main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: CacheVolume, MountPath: cacheDir})
	}
	dir := cacheDir
	for _, m := range main.VolumeMounts {
		if m.Name == CacheVolume {
			dir = m.MountPath
		}
	}
	main.Args = append(main.Args, "--cache-dir", path.Clean(dir))
	main.Env = append(main.Env, packageCacheEnv(main.Env, path.Clean(dir))...)
	if own {
		return
	}
	main.Args = append(main.Args, "--cache-max-bytes", strconv.FormatInt(opts.budget(), 10))
	// The claim's name is the one the API server gives the claim the
	// runtime makes (bindCacheClaim); until then it is empty.
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: CacheVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{},
	}})
}

// ownCacheVolume is the volume of sts whose claim the runtime makes: the
// cache volume addCache added with no claim name yet; nil when the
// Workspace brings its own cache volume or has none.
func ownCacheVolume(sts *appsv1.StatefulSet) *corev1.PersistentVolumeClaimVolumeSource {
	for i, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == CacheVolume && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "" {
			return sts.Spec.Template.Spec.Volumes[i].PersistentVolumeClaim
		}
	}
	return nil
}

// cacheClaim is the claim the runtime makes for ws's cache: named by the
// API server, labelled as ws's pod is, ReadWriteOnce, of opts' size and
// class.
func cacheClaim(ws *autov1alpha1.Workspace, opts CacheOptions) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ObjectName(ws) + "-cache-", Namespace: ws.Namespace, Labels: Labels(ws)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: opts.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: opts.Size},
			},
		},
	}
}

// claimRecord is CacheClaimAnnotation's value for a claim.
func claimRecord(name string, uid types.UID) string { return name + "/" + string(uid) }

// parseClaimRecord reads CacheClaimAnnotation's value; ok is false when
// it is absent or not one.
func parseClaimRecord(v string) (name string, uid types.UID, ok bool) {
	n, u, found := strings.Cut(v, "/")
	return n, types.UID(u), found && n != "" && u != ""
}

// PackageCache is a package manager's download cache: the environment
// variable that names its directory, and that directory under the cache
// volume's "packages".
type PackageCache struct{ Env, Dir string }

// PackageCaches are the environment variables that point each language's
// package manager at its download cache, and the directory under the
// cache volume each gets. The package managers key their caches on
// package name, version and integrity hash, and are made to be shared
// and used concurrently, so `pulumi install` in a new pod downloads only
// what no pod of the Workspace downloaded before; what it then lays out
// in the program's directory (node_modules, a venv) is made again.
var PackageCaches = []PackageCache{
	{"npm_config_cache", "npm"},
	{"YARN_CACHE_FOLDER", "yarn"},
	{"BUN_INSTALL_CACHE_DIR", "bun"},
	{"PIP_CACHE_DIR", "pip"},
	{"UV_CACHE_DIR", "uv"},
	{"POETRY_CACHE_DIR", "poetry"},
	{"GOMODCACHE", "go/mod"},
	{"GOCACHE", "go/build"},
	{"NUGET_PACKAGES", "nuget"},
	{"GRADLE_USER_HOME", "gradle"},
}

// packageCacheEnv returns the variables of PackageCaches under dir that
// env does not set: a Workspace's own setting wins.
func packageCacheEnv(env []corev1.EnvVar, dir string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, c := range PackageCaches {
		if slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == c.Env }) {
			continue
		}
		out = append(out, corev1.EnvVar{Name: c.Env, Value: path.Join(dir, "packages", c.Dir)})
	}
	return out
}

// withEphemeralStorage sets the operator's default ephemeral-storage
// request and limit on a container whose resources leave them unset: the
// emptyDir holding the source and what the program installs counts
// against them, and a pod with neither is the first evicted when a node's
// disk runs short.
func withEphemeralStorage(r corev1.ResourceRequirements, request, limit resource.Quantity) corev1.ResourceRequirements {
	set := func(list *corev1.ResourceList, q resource.Quantity) {
		if q.IsZero() {
			return
		}
		if _, ok := (*list)[corev1.ResourceEphemeralStorage]; ok {
			return
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[corev1.ResourceEphemeralStorage] = q
	}
	out := *r.DeepCopy()
	if _, hasLimit := out.Limits[corev1.ResourceEphemeralStorage]; hasLimit && !request.IsZero() {
		// A user's limit below the default request would make the pod
		// invalid: the request follows the user's limit then.
		if l := out.Limits[corev1.ResourceEphemeralStorage]; l.Cmp(request) < 0 {
			request = l
		}
	}
	if _, hasRequest := out.Requests[corev1.ResourceEphemeralStorage]; hasRequest {
		if q := out.Requests[corev1.ResourceEphemeralStorage]; !limit.IsZero() && q.Cmp(limit) > 0 {
			limit = q
		}
	}
	set(&out.Requests, request)
	set(&out.Limits, limit)
	return out
}
