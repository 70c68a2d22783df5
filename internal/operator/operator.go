// Package operator assembles stackyard's controller manager: the Program,
// Stack, Workspace and Update controllers, the change-management ones
// (Pipeline, Stage, Promotion, pull request) and the notification ones
// (Receiver, Alert), the artifact server, the chosen workspace runtime,
// the dashboard, the Pulumi Cloud-compatible API, the admission webhooks,
// metrics, probes and leader election (`stackyard operator --help` lists
// them, with what a named shard leaves out). `stackyard
// operator` runs it in a cluster and `stackyard dev` on a developer's
// machine; tests start it against a real API server.
package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	pulumiv1alpha1 "github.com/stackyard/stackyard/api/pulumi/v1alpha1"
	"github.com/stackyard/stackyard/internal/artifact"
	"github.com/stackyard/stackyard/internal/cloudapi"
	alertctl "github.com/stackyard/stackyard/internal/controller/alert"
	"github.com/stackyard/stackyard/internal/controller/program"
	receiverctl "github.com/stackyard/stackyard/internal/controller/receiver"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/controller/update"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/internal/dashboard"
	"github.com/stackyard/stackyard/internal/editstamp"
	"github.com/stackyard/stackyard/internal/leader"
	"github.com/stackyard/stackyard/internal/metrics"
	"github.com/stackyard/stackyard/internal/notify"
	"github.com/stackyard/stackyard/internal/readcheck"
	"github.com/stackyard/stackyard/internal/receiver"
	stackruntime "github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/runtime/kubernetes"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/internal/servingcert"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/internal/source"
)

// The manager itself records events (leader election among them). Its Lease
// needs rights in its own namespace only, which a ClusterRole cannot
// express: they are in config/rbac/leader_election_role.yaml. The
// controllers' and runtimes' needs are declared beside them.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Runtime names.
const (
	RuntimeLocal      = "local"
	RuntimeKubernetes = "kubernetes"
)

// Options configure the operator.
type Options struct {
	// Runtime is where agents run: "kubernetes" (pods) or "local"
	// (subprocesses of the operator).
	Runtime string
	// StateDir holds the local runtime's workspaces and the artifact store.
	StateDir string
	// ArtifactListen is the artifact server's listen address
	// ("127.0.0.1:0" picks a free port).
	ArtifactListen string
	// CloudAPIAddr is the listen address of the Pulumi Cloud-compatible
	// update history API that Kargo AnalysisTemplates query
	// (internal/cloudapi); empty or "0" disables it.
	CloudAPIAddr string
	// DashboardAddr is the listen address of the web dashboard
	// (internal/dashboard); empty or "0" disables it.
	DashboardAddr string
	// ReceiverAddr is the listen address of the Receivers' webhook
	// endpoint (internal/receiver); empty or "0" disables it.
	ReceiverAddr string
	// DashboardReadOnly serves the dashboard without its actions.
	DashboardReadOnly bool
	// DashboardURL is the address users reach the dashboard at (behind an
	// ingress, say); when set, Updates without a backend permalink, and so
	// the Stacks' status.lastUpdate.permalink, link to its pages.
	DashboardURL string
	// ArtifactURL is the base URL agents use to download artifacts; empty
	// derives it from the listen address, which only the local runtime can
	// use: the kubernetes runtime requires it.
	ArtifactURL string
	// AgentPath is the stackyard binary the local runtime runs as `agent
	// init`, and as `agent serve` unless the lean agent (stackyard-agent)
	// is installed beside it (see local.Options.ServePath); empty means
	// this executable.
	AgentPath string
	// ToolDirs are put first on local agents' PATH (pulumi, language
	// hosts, providers).
	ToolDirs []string
	// AgentEnv is added to every local agent's environment.
	AgentEnv map[string]string
	// InitImage is the image of the kubernetes runtime's init container
	// (the operator's own image, which holds stackyard and stackyard-agent).
	InitImage string
	// WorkspaceCache configures the kubernetes runtime's cache claims, one
	// per Workspace, which keep what `pulumi install` fetched while the
	// Workspace idles; a zero Size turns them off.
	WorkspaceCache kubernetes.CacheOptions
	// WorkspaceEphemeralStorageRequest and WorkspaceEphemeralStorageLimit
	// are the workspace pods' ephemeral-storage request and limit where
	// the Workspace's spec.resources leave them unset; zero sets none.
	WorkspaceEphemeralStorageRequest, WorkspaceEphemeralStorageLimit resource.Quantity
	// ServiceAccount is the operator's own service account (kubernetes
	// runtime: tokens to reach agents are minted for it).
	ServiceAccount types.NamespacedName
	// MetricsAddr and ProbeAddr are the metrics and health endpoints ("0"
	// disables).
	MetricsAddr, ProbeAddr string
	// PprofAddr serves Go's profiles (net/http/pprof) for diagnosing the
	// operator's own CPU and memory; empty or "0" disables it.
	PprofAddr string
	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the lease.
	LeaderElectionNamespace string
	// Pod is this replica's own Pod (from the downward API). When set, the
	// replica that leads labels it leader.Label and removes the label from
	// the installation's other Pods, so that the artifacts Service, which
	// selects the label, sends downloads to the replica that builds the
	// artifacts (internal/leader). Empty outside a cluster.
	Pod types.NamespacedName
	// Shard is the part of the cluster's Stacks this operator reconciles
	// (internal/shard). A named shard runs the Stack, Workspace and Update
	// controllers only; the default shard (the zero value) runs everything.
	Shard shard.Shard
	// WatchNamespaces limits the Stacks, Programs, Workspaces, Updates and
	// change-management objects the operator reconciles, and everything it
	// caches, to these namespaces; empty means every namespace. With it the
	// operator needs its ClusterRole bound in these namespaces only (plus
	// the rules for cluster-scoped resources, bound cluster-wide).
	WatchNamespaces []string
	// IdleAfter is how long an agent stays up without pending work.
	IdleAfter time.Duration
	// OperationTimeout bounds one Pulumi operation; zero means no bound
	// beyond the program's own customTimeouts.
	OperationTimeout time.Duration
	// MaxAgents bounds the local runtime's agents running at once, and so
	// its concurrent operations; a Workspace past it waits its turn. Zero
	// means unbounded (the flag's default is local.DefaultMaxAgents).
	MaxAgents int
	// WarmAgents is how many agents the local runtime keeps pre-started
	// while agents are being started, so that an agent start binds one
	// instead of waiting for a process (see local.Options.WarmAgents).
	// Zero keeps none (the flag's default is local.DefaultWarmAgents).
	WarmAgents int
	// StackConcurrency is how many Stacks are reconciled at once.
	StackConcurrency int
	// StallAfter is how long the same failure of a Stack or Workspace
	// (an API call refused, a Secret missing) may last before the object
	// is Stalled instead of Reconciling; zero means
	// reconcile.DefaultStallAfter (5 minutes).
	StallAfter time.Duration
	// MinResync lowers the 60 s floor of a Stack's poll/resync interval;
	// only tests set it.
	MinResync time.Duration
	// Webhook serves the admission webhook that records who edited a
	// governed Stack (internal/editstamp); an empty Addr disables it.
	Webhook WebhookOptions
	// SkipControllerNameValidation lets the operator be assembled again in
	// a process where an earlier one was stopped: controller-runtime
	// otherwise refuses controller names it has seen before. Only tests
	// that restart the operator set it.
	SkipControllerNameValidation bool
}

// WebhookOptions configure the admission webhook's server and its
// serving certificate (internal/servingcert).
type WebhookOptions struct {
	// Addr is where the webhook server listens, host:port; empty or "0"
	// disables it.
	Addr string
	// Secret keeps the CA and the serving certificate every replica
	// serves, in the operator's own namespace.
	Secret types.NamespacedName
	// Hosts are the names and addresses the certificate covers (the
	// webhook Service's DNS names).
	Hosts []string
	// Configuration is the MutatingWebhookConfiguration whose caBundle
	// the operator sets; empty sets none.
	Configuration string
	// ValidatingConfiguration is the ValidatingWebhookConfiguration whose
	// caBundle the operator sets; empty sets none.
	ValidatingConfiguration string
}

// Scheme returns a scheme with the built-in kinds and stackyard's API.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, pulumiv1.AddToScheme, pulumiv1alpha1.AddToScheme, autov1alpha1.AddToScheme,
		promotionv1alpha1.AddToScheme, notificationv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Operator is an assembled manager, ready to Start.
type Operator struct {
	// Manager runs the controllers.
	Manager manager.Manager
	// Dashboard is the web dashboard, when Options.DashboardAddr enables
	// it; its Addr is where it listens.
	Dashboard *dashboard.Server
}

// New builds the manager and registers every controller with it.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Operator, error) {
	if opts.StateDir == "" {
		return nil, errNoStateDir
	}
	if opts.ArtifactURL == "" && (opts.Runtime == RuntimeKubernetes || opts.Runtime == "") {
		// Derived from the listen address it would name this host's
		// loopback, which no workspace pod can reach.
		return nil, errNoArtifactURL
	}
	watched, err := watchedNamespaces(opts.WatchNamespaces)
	if err != nil {
		return nil, err
	}
	if err := checkShardOptions(opts); err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	webhooks, err := webhookServer(ctx, cfg, scheme, opts)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           webhooks,
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: cmp.Or(opts.MetricsAddr, "0")},
		HealthProbeBindAddress:  cmp.Or(opts.ProbeAddr, "0"),
		PprofBindAddress:        cmp.Or(opts.PprofAddr, "0"),
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.Shard.LeaderElectionID("stackyard.pulumi.com"),
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// The process exits when the manager stops (its operations are
		// cancelled first), so the next replica may lead at once instead
		// of waiting for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(ShutdownTimeout),
		Controller:                    config.Controller{SkipNameValidation: &opts.SkipControllerNameValidation},
		// Secrets and ConfigMaps are read one at a time when a spec names
		// them. Caching them would keep every Secret of the cluster in the
		// operator's memory and need the right to list and watch them all.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
		// Every namespaced kind is cached, and so watched and reconciled,
		// in the watched namespaces only (nil: all of them); cluster-scoped
		// kinds stay cluster-wide. The shard's kinds are cached for the
		// shard only.
		Cache: cache.Options{DefaultNamespaces: watched, ByObject: shardCache(opts.Shard)},
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}

	if webhooks != nil {
		// The manager runs the server (on every replica, leader or not)
		// once it has been asked for it.
		editstamp.Register(mgr.GetWebhookServer(), scheme)
		readcheck.Register(mgr.GetWebhookServer(), scheme, mgr.GetClient())
	}

	store, err := addArtifactServer(mgr, opts)
	if err != nil {
		return nil, err
	}
	if err := addLeaderLabeler(mgr, opts); err != nil {
		return nil, err
	}

	var dash *dashboard.Server
	if opts.Shard.IsDefault() {
		if dash, err = addHub(ctx, mgr, opts); err != nil {
			return nil, err
		}
	}

	events, notify := workspace.NotifyChannel()
	rt, owns, err := newRuntime(mgr, opts, notify)
	if err != nil {
		return nil, err
	}

	updates := metrics.NewUpdates()
	if err := metrics.Register(mgr.GetClient(), opts.Shard.Selector(), updates); err != nil {
		return nil, err
	}

	if opts.Shard.IsDefault() {
		if err := (&program.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Store: store, Recorder: mgr.GetEventRecorder("program-controller")}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("program controller: %w", err)
		}
	}
	if err := (&workspace.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Runtime: rt, Recorder: mgr.GetEventRecorder("workspace-controller"),
		Options: workspace.Options{IdleAfter: opts.IdleAfter, Owns: owns, RuntimeEvents: events, StallAfter: opts.StallAfter, Refusals: updates},
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("workspace controller: %w", err)
	}
	if err := (&update.Reconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Runtime: rt, Recorder: mgr.GetEventRecorder("update-controller"),
		Options: update.Options{Metrics: updates, DashboardURL: opts.DashboardURL, OperationTimeout: opts.OperationTimeout, Shard: opts.Shard},
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("update controller: %w", err)
	}
	// One poller answers every Stack and Pipeline: many of them on one
	// repository make one query per interval.
	poller := source.NewPoller()
	stackReconciler := &stack.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("stack-controller"), Poller: poller,
		MinResync: opts.MinResync, StallAfter: opts.StallAfter, Shard: opts.Shard,
	}
	if err := stackReconciler.SetupWithManager(ctx, mgr, stack.Options{MaxConcurrentReconciles: opts.StackConcurrency}); err != nil {
		return nil, fmt.Errorf("stack controller: %w", err)
	}
	if opts.Shard.IsDefault() {
		if err := setupPromotion(ctx, mgr, opts, poller); err != nil {
			return nil, err
		}
	}
	return &Operator{Manager: mgr, Dashboard: dash}, nil
}

// newRuntime builds the chosen workspace runtime and the kinds it creates
// owned by Workspaces.
func newRuntime(mgr manager.Manager, opts Options, notify func(types.NamespacedName)) (stackruntime.Runtime, []client.Object, error) {
	switch opts.Runtime {
	case RuntimeLocal:
		rt, err := local.New(local.Options{
			Root:      filepath.Join(opts.StateDir, "workspaces"),
			Client:    mgr.GetAPIReader(),
			AgentPath: opts.AgentPath,
			PathDirs:  opts.ToolDirs,
			Env:       opts.AgentEnv,
			OnExit:    notify,
			MaxAgents: opts.MaxAgents,
			// Zero here means none; to the runtime, its default.
			WarmAgents: cmp.Or(opts.WarmAgents, -1),
			Log:        mgr.GetLogger().WithName("local-runtime"),
		})
		if err != nil {
			return nil, nil, err
		}
		if err := mgr.Add(rt); err != nil {
			return nil, nil, err
		}
		if err := metrics.RegisterCollectors(rt.Collector()); err != nil {
			return nil, nil, err
		}
		return rt, nil, nil
	case RuntimeKubernetes, "":
		rt, err := kubernetes.New(kubernetes.Options{
			Client: mgr.GetClient(),
			Reader: mgr.GetAPIReader(),
			Scheme: mgr.GetScheme(),
			Build: kubernetes.BuildOptions{
				InitImage:               opts.InitImage,
				Cache:                   opts.WorkspaceCache,
				EphemeralStorageRequest: opts.WorkspaceEphemeralStorageRequest,
				EphemeralStorageLimit:   opts.WorkspaceEphemeralStorageLimit,
			},
			ServiceAccount: opts.ServiceAccount,
		})
		if err != nil {
			return nil, nil, err
		}
		// The runtime's StatefulSets are owned by their Workspaces; a pod
		// turning ready wakes the Workspace through them.
		return rt, []client.Object{&appsv1.StatefulSet{}}, nil
	default:
		return nil, nil, fmt.Errorf("unknown runtime %q: use %q or %q", opts.Runtime, RuntimeKubernetes, RuntimeLocal)
	}
}

// The webhooks' configurations, whose caBundle the operator sets, by name
// (readcheck asks the authorizer with SubjectAccessReviews);
// the Secret of its certificate is in the operator's own namespace
// (config/rbac/leader_election_role.yaml).
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;update,resourceNames=stackyard-edit-stamp
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=stackyard-read-check
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// webhookServer makes, or reads, the webhook's serving certificate,
// sets its CA in the webhook's configuration and returns the server that
// serves it; nil when Options.Webhook disables it.
func webhookServer(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts Options) (webhook.Server, error) {
	o := opts.Webhook
	if o.Addr == "" || o.Addr == "0" {
		return nil, nil
	}
	host, portText, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address=%s: %w", o.Addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("--webhook-bind-address=%s: the port must be a number from 1 to 65535", o.Addr)
	}
	if o.Secret.Name == "" || o.Secret.Namespace == "" {
		return nil, errors.New("--webhook-secret: the webhook's serving certificate needs a Secret, namespace/name")
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.StateDir, "webhook")
	if _, err := servingcert.Ensure(ctx, c, time.Now(), servingcert.Options{
		Secret: o.Secret, Hosts: o.Hosts, Dir: dir, Configuration: o.Configuration, ValidatingConfiguration: o.ValidatingConfiguration,
	}); err != nil {
		return nil, err
	}
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: dir}), nil
}

// addArtifactServer opens the artifact store and serves it; the store's
// URLs are what agents download from.
func addArtifactServer(mgr manager.Manager, opts Options) (*artifact.Store, error) {
	ln, err := net.Listen("tcp", cmp.Or(opts.ArtifactListen, "127.0.0.1:0"))
	if err != nil {
		return nil, fmt.Errorf("artifact server: %w", err)
	}
	url := opts.ArtifactURL
	if url == "" {
		url = artifact.LocalURL(ln.Addr())
	}
	store, err := artifact.NewStore(filepath.Join(opts.StateDir, "artifacts"), url)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := mgr.Add(artifact.NewServer(store, ln, mgr.GetLogger().WithName("artifacts"))); err != nil {
		return nil, err
	}
	return store, nil
}

// addLeaderLabeler keeps the leader label on the leading replica's Pod
// when the operator knows its own Pod: the artifacts Service selects it,
// because only the leader builds Program artifacts.
func addLeaderLabeler(mgr manager.Manager, opts Options) error {
	if opts.Pod == (types.NamespacedName{}) {
		return nil
	}
	// Not the manager's client: its cache holds the watched namespaces
	// only, which need not include the operator's own.
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("leader labels: %w", err)
	}
	return mgr.Add(&leader.Labeler{
		Client: c, Pod: opts.Pod, Elected: mgr.Elected(), Log: mgr.GetLogger().WithName("leader-label"),
	})
}

// watchedNamespaces checks the namespaces to watch and returns them as the
// cache wants them; nil when every namespace is watched.
func watchedNamespaces(names []string) (map[string]cache.Config, error) {
	if len(names) == 0 {
		return nil, nil
	}
	watched := make(map[string]cache.Config, len(names))
	for _, ns := range names {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("operator: --watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		watched[ns] = cache.Config{}
	}
	return watched, nil
}

// The cloud API checks each caller's token and right to get a Stack with
// the API server.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// addCloudAPI serves the cloud API when an address is set. It reads Stacks
// and Updates through the manager's cache, Stacks through an index.
func addCloudAPI(ctx context.Context, mgr manager.Manager, opts Options) error {
	if opts.CloudAPIAddr == "" || opts.CloudAPIAddr == "0" {
		return nil
	}
	if err := cloudapi.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("cloud API: %w", err)
	}
	ln, err := net.Listen("tcp", opts.CloudAPIAddr)
	if err != nil {
		return fmt.Errorf("cloud API: %w", err)
	}
	return mgr.Add(cloudapi.NewServer(ln, cloudapi.NewHandler(mgr.GetClient(), mgr.GetLogger().WithName("cloud-api"))))
}

// addReceivers reconciles Receivers and, when an address is set, serves
// their webhooks.
func addReceivers(mgr manager.Manager, opts Options) error {
	ctx := context.Background()
	if err := receiver.IndexPath(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing Receivers: %w", err)
	}
	if err := (&receiverctl.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if opts.ReceiverAddr == "" || opts.ReceiverAddr == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", opts.ReceiverAddr)
	if err != nil {
		return fmt.Errorf("receivers: %w", err)
	}
	h := &receiver.Handler{
		Reader: mgr.GetClient(), Secrets: mgr.GetClient(), Status: mgr.GetClient(),
		Waker: &receiver.Waker{Client: mgr.GetClient()}, Log: mgr.GetLogger().WithName("receiver"),
	}
	return mgr.Add(receiver.NewServer(ln, h))
}

// addAlerts runs the Alert controller, the only place notifications are
// sent from: a slow or failing Provider delays its Alerts and no other
// reconciler.
func addAlerts(mgr manager.Manager, opts Options) error {
	counts := metrics.NewNotifications()
	if err := metrics.RegisterCollectors(counts.Collectors()...); err != nil {
		return err
	}
	r := &alertctl.Reconciler{
		Client: mgr.GetClient(), Secrets: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sender: notify.NewSender(),
		DashboardURL: opts.DashboardURL, Metrics: counts,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("alert controller: %w", err)
	}
	return nil
}

// addDashboard serves the dashboard when an address is set. It reads
// through the manager's cache and acts with each user's own token.
func addDashboard(mgr manager.Manager, opts Options) (*dashboard.Server, error) {
	if opts.DashboardAddr == "" || opts.DashboardAddr == "0" {
		return nil, nil
	}
	srv, err := dashboard.New(dashboard.Config{
		Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Reviews: mgr.GetClient(), Informers: mgr.GetCache(), RESTConfig: mgr.GetConfig(),
		ReadOnly: opts.DashboardReadOnly, Log: mgr.GetLogger().WithName("dashboard"),
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(opts.DashboardAddr); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return srv, mgr.Add(srv)
}

var (
	errNoStateDir    = errors.New("operator: a state directory is required (artifacts, local workspaces)")
	errNoArtifactURL = errors.New("operator: the kubernetes runtime needs the artifact server's URL as workspace pods reach it " +
		"(--artifact-url, e.g. http://stackyard-artifacts.<namespace>.svc:9090)")
)
