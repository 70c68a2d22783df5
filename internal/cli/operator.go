package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/stackyard/stackyard/internal/editstamp"
	"github.com/stackyard/stackyard/internal/leader"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/readcheck"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime/kubernetes"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/internal/shard"
)

func init() {
	subcommands = append(subcommands, newOperatorCommand)
}

// newOperatorCommand builds `stackyard operator`: the controller manager.
func newOperatorCommand() *cobra.Command {
	var opts operator.Options
	var toolDirs, serviceAccount, pod, webhookSecret string
	var watchNamespaces, shards []string
	var shardName string
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the controller manager: the Stack, Program, Workspace, Update, change-management and notification controllers, the dashboard, the APIs and the webhooks",
		Long:  operatorLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			// Read from the environment here, not as the flags' defaults,
			// so that the help (and the CLI reference) reads the same
			// wherever it is printed.
			if !cmd.Flags().Changed("service-account") {
				serviceAccount = os.Getenv("POD_NAMESPACE") + "/stackyard"
			}
			if !cmd.Flags().Changed("pod") {
				pod = ownPod()
			}
			if toolDirs != "" {
				opts.ToolDirs = strings.Split(toolDirs, string(os.PathListSeparator))
			}
			if ns, name, ok := strings.Cut(serviceAccount, "/"); ok {
				opts.ServiceAccount = types.NamespacedName{Namespace: ns, Name: name}
			}
			if pod != "" {
				ns, name, ok := strings.Cut(pod, "/")
				if !ok || ns == "" || name == "" {
					return fmt.Errorf("--pod=%q: want namespace/name of this replica's own Pod", pod)
				}
				opts.Pod = types.NamespacedName{Namespace: ns, Name: name}
			}
			if webhookSecret != "" {
				ns, name, ok := strings.Cut(webhookSecret, "/")
				if !ok || ns == "" || name == "" {
					return fmt.Errorf("--webhook-secret=%q: want namespace/name of the Secret that keeps the webhook's certificate", webhookSecret)
				}
				opts.Webhook.Secret = types.NamespacedName{Namespace: ns, Name: name}
			}
			for _, ns := range watchNamespaces {
				if ns = strings.TrimSpace(ns); ns != "" {
					opts.WatchNamespaces = append(opts.WatchNamespaces, ns)
				}
			}
			sh, err := shard.New(shardName, shards)
			if err != nil {
				return err
			}
			opts.Shard = sh
			ctx := ctrl.SetupSignalHandler()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			op, err := operator.New(ctx, cfg, opts)
			if err != nil {
				return err
			}
			return op.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Runtime, "runtime", operator.RuntimeKubernetes, "where workspace agents run: kubernetes (pods) or local (subprocesses)")
	f.StringVar(&opts.StateDir, "state-dir", "/var/lib/stackyard", "directory for artifacts and local workspaces")
	f.StringVar(&opts.ArtifactListen, "artifact-listen", ":9090", "listen address of the artifact server")
	f.StringVar(&opts.ArtifactURL, "artifact-url", "", "base URL agents download artifacts from; required with --runtime=kubernetes (the local runtime derives it from --artifact-listen)")
	f.StringVar(&opts.InitImage, "agent-image", "ghcr.io/stackyard/stackyard:latest", "image of the workspace pods' init container (holds the stackyard binary)")
	opts.WorkspaceCache.Size = resource.MustParse(defaultCacheSize)
	f.Var(quantity{&opts.WorkspaceCache.Size}, "workspace-cache-size", "kubernetes runtime: each Workspace's cache claim, which keeps the plugins \"pulumi install\" fetched while the Workspace idles (0: no claims; a Workspace's own volume named \""+kubernetes.CacheVolume+"\" in spec.podTemplate replaces its claim)")
	f.Var(optionalString{&opts.WorkspaceCache.StorageClassName}, "workspace-cache-storage-class", "kubernetes runtime: the cache claims' StorageClass (default: the cluster's default class)")
	f.Var(quantity{&opts.WorkspaceEphemeralStorageRequest}, "workspace-ephemeral-storage-request", "kubernetes runtime: the workspace pods' ephemeral-storage request where the Workspace's spec.resources sets none (empty: none)")
	f.Var(quantity{&opts.WorkspaceEphemeralStorageLimit}, "workspace-ephemeral-storage-limit", "kubernetes runtime: the workspace pods' ephemeral-storage limit where the Workspace's spec.resources sets none (empty: none)")
	f.StringVar(&serviceAccount, "service-account", "", "the operator's own service account, namespace/name (kubernetes runtime; default: $POD_NAMESPACE/stackyard)")
	f.StringVar(&toolDirs, "tool-dirs", "", "directories put first on local agents' PATH (pulumi, language hosts, providers)")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", `metrics endpoint ("0" disables)`)
	f.StringVar(&opts.CloudAPIAddr, "cloud-api-bind-address", "0", `Pulumi Cloud-compatible update history API for Kargo verification, e.g. ":9091" ("0" disables)`)
	f.StringVar(&opts.DashboardAddr, "dashboard-bind-address", "0", `web dashboard, e.g. ":8090" ("0" disables)`)
	f.StringVar(&opts.ReceiverAddr, "receiver-bind-address", "0", `webhook endpoint of Receivers (pushes from forges), e.g. ":9292" ("0" disables)`)
	f.StringVar(&opts.DashboardURL, "dashboard-external-url", "", "address users reach the dashboard at, e.g. https://stackyard.example.com; Updates without a Pulumi Cloud permalink link to its pages")
	f.BoolVar(&opts.DashboardReadOnly, "dashboard-read-only", false, "serve the dashboard without actions (approve, reject, promote, roll back, reconcile)")
	f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", `health and readiness probes ("0" disables)`)
	f.StringVar(&opts.PprofAddr, "pprof-bind-address", "0", `Go profiles of the operator itself (/debug/pprof/), for diagnosis, e.g. "127.0.0.1:6060" ("0" disables)`)
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "run only one active replica")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease")
	f.StringVar(&pod, "pod", "", "this replica's own Pod, namespace/name (default: the POD_NAMESPACE and POD_NAME environment variables, from the downward API); "+
		"the leader labels it "+leader.Label+"=true and removes the label from the other replicas' Pods, so a Service that selects it reaches the leader (empty: no label)")
	f.StringSliceVar(&watchNamespaces, "watch-namespaces", nil, "comma-separated namespaces whose Stacks, Programs, Workspaces, Updates and pipelines the operator reconciles (empty: all namespaces)")
	f.StringVar(&shardName, "shard", "", "the shard this operator reconciles: the Stacks labelled "+shard.Label+"=<shard>, their Workspaces and Updates, under a leader election of its own (empty: the default shard, which also runs Programs, pipelines, notifications, the dashboard and the APIs)")
	f.StringSliceVar(&shards, "shards", nil, "comma-separated names of every named shard of the installation: the default shard leaves their Stacks alone and reconciles every other one, an unknown shard label included (empty: the default shard reconciles every Stack)")
	f.DurationVar(&opts.IdleAfter, "idle-after", time.Minute, "stop a workspace agent after this long without pending operations")
	f.DurationVar(&opts.OperationTimeout, "operation-timeout", 0, "cancel a Pulumi operation that runs longer than this and fail its Update (0: no bound beyond the program's customTimeouts)")
	f.DurationVar(&opts.StallAfter, "stall-after", sreconcile.DefaultStallAfter, "mark an object Stalled once the same failure (an API call, a missing Secret) has lasted this long")
	f.IntVar(&opts.WarmAgents, "warm-agents", local.DefaultWarmAgents, "local runtime: agents kept pre-started while agents are being started, so that a Workspace's agent start does not wait for a process to start; they hold no place of --max-agents, and go 2 minutes after the last start (0: none)")
	f.IntVar(&opts.MaxAgents, "max-agents", local.DefaultMaxAgents(), "local runtime: agents (and so operations) running at once; more wait their turn, first come first served (0: unbounded; default: 2 per usable core, at most one per 256 MiB of memory, within the container's limits)")
	docDefault(f, "max-agents", "2 per usable core, at most one per 256 MiB of memory")
	f.StringVar(&opts.Webhook.Addr, "webhook-bind-address", "0", `admission webhooks that record who edited a governed Stack and refuse an edit of one that names a Secret or ConfigMap its author may not read, e.g. ":9443" ("0" disables)`)
	f.StringVar(&webhookSecret, "webhook-secret", "", "the Secret, namespace/name, that keeps the webhook's CA and serving certificate, which the operator makes when it is missing")
	f.StringSliceVar(&opts.Webhook.Hosts, "webhook-hosts", nil, "comma-separated DNS names and IP addresses the webhook's serving certificate covers (the webhook Service's names)")
	f.StringVar(&opts.Webhook.Configuration, "webhook-configuration", "", "the MutatingWebhookConfiguration whose caBundle the operator sets to the webhook's CA (empty: none)")
	f.StringVar(&opts.Webhook.ValidatingConfiguration, "webhook-validating-configuration", "", "the ValidatingWebhookConfiguration whose caBundle the operator sets to the webhook's CA (empty: none)")
	f.IntVar(&opts.StackConcurrency, "stack-concurrency", 4, "Stacks reconciled at once (reconciles never wait for operations)")
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	zapOpts.BindFlags(logFlags)
	f.AddGoFlagSet(logFlags)
	return cmd
}

// operatorLong is `stackyard operator --help`'s description: every
// controller internal/operator registers and every server it starts. It
// must follow internal/operator when a controller or a server is added;
// TestOperatorHelpNamesEveryKind checks that it names every kind of
// config/crd/bases.
const operatorLong = `Run the controller manager: the controllers of stackyard's kinds and the
servers beside them, in one process.

Controllers, by API group:
  pulumi.com/v1 (Stack is also served as the deprecated pulumi.com/v1alpha1)
    Stack          resolves each Stack's program source, keeps a Workspace for it
                   and runs its updates as Update objects
    Program        renders each Program into a Pulumi YAML project, served as an
                   artifact
  auto.pulumi.com/v1alpha1
    Workspace      runs each Workspace's agent (a pod, or a local process) while
                   it is in use and sets its stacks up
    Update         runs each Update's Pulumi operation (preview, up, refresh,
                   destroy) through its Workspace's agent
  promotion.stackyard.dev/v1alpha1 (change management)
    Pipeline       records each new version of a Pipeline's repository as a Release
    Stage          reports what runs in each Stage and how it is, and asks for its
                   automatic promotions
    Promotion      moves a Release into a Stage, after the Approvals the Stage
                   requires, in the Stage's waves, acting on Interventions, and
                   records the outcome
    pull request   previews the open pull requests of Pipelines that set
                   spec.pullRequests and comments on them
  notification.stackyard.dev/v1alpha1 (notifications)
    Receiver       publishes the path each Receiver's webhook is served at
    Alert          sends the events of Promotions, Releases and Stacks to the
                   Alert's Provider
Releases (created by the Pipeline controller), StackPromotions (each Stack's
preview in a Promotion, written by the Promotion controller), Approvals
(written by people: stackyard approve and reject, the dashboard), Interventions
(written by people: stackyard halt, resume and abort) and Providers (read by
the Alert controller) have no controller of their own.

Servers:
  artifacts            --artifact-listen             Program artifacts, which workspace
                                                     agents download
  metrics              --metrics-bind-address        Prometheus metrics (/metrics)
  health probes        --health-probe-bind-address   /healthz and /readyz
  profiles             --pprof-bind-address          Go profiles (/debug/pprof/)
  Pulumi Cloud API     --cloud-api-bind-address      the Stacks' update history, as
                                                     Pulumi Cloud serves it, for Kargo
  dashboard            --dashboard-bind-address      the web dashboard
  Receivers' webhooks  --receiver-bind-address       pushes from forges
  admission webhooks   --webhook-bind-address        ` + editstamp.Path + ` records who edited
                                                     a governed Stack; ` + readcheck.Path + `
                                                     refuses an edit naming a Secret or
                                                     ConfigMap its author may not read
The flags say which are off by default ("0").

A named shard (--shard) runs the Stack, Workspace and Update controllers
only, and serves neither the Pulumi Cloud API, the dashboard nor the
Receivers' webhooks: the default shard runs everything.`

// ownPod is the operator's own Pod as the downward API names it in the
// environment, namespace/name, or "" outside a Pod.
func ownPod() string {
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}

// defaultCacheSize is --workspace-cache-size's default: room for a few
// providers (Pulumi's Kubernetes provider alone is about 250 MB
// unpacked) and their older versions.
const defaultCacheSize = "2Gi"

// quantity is a flag holding a resource quantity ("2Gi"); empty is zero.
type quantity struct{ q *resource.Quantity }

func (v quantity) String() string {
	if v.q == nil || v.q.IsZero() {
		return ""
	}
	return v.q.String()
}

func (v quantity) Set(s string) error {
	if s == "" {
		*v.q = resource.Quantity{}
		return nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a quantity such as 2Gi or 500M: %w", err)
	}
	if q.Sign() < 0 {
		return fmt.Errorf("want a quantity of zero or more, got %s", s)
	}
	*v.q = q
	return nil
}

func (quantity) Type() string { return "quantity" }

// optionalString is a string flag that is nil until set.
type optionalString struct{ s **string }

func (v optionalString) String() string {
	if v.s == nil || *v.s == nil {
		return ""
	}
	return **v.s
}

func (v optionalString) Set(s string) error {
	*v.s = &s
	return nil
}

func (optionalString) Type() string { return "string" }
