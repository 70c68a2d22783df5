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

	"github.com/stackyard/stackyard/internal/leader"
	"github.com/stackyard/stackyard/internal/operator"
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
		Short: "Run the controller manager (Stack, Program, Workspace and Update controllers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
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
	f.Var(quantity{&opts.WorkspaceCache.Size}, "workspace-cache-size", "kubernetes runtime: each Workspace's cache claim, which keeps the plugins `pulumi install` fetched while the Workspace idles (0: no claims; a Workspace's own volume named \""+kubernetes.CacheVolume+"\" in spec.podTemplate replaces its claim)")
	f.Var(optionalString{&opts.WorkspaceCache.StorageClassName}, "workspace-cache-storage-class", "kubernetes runtime: the cache claims' StorageClass (default: the cluster's default class)")
	f.Var(quantity{&opts.WorkspaceEphemeralStorageRequest}, "workspace-ephemeral-storage-request", "kubernetes runtime: the workspace pods' ephemeral-storage request where the Workspace's spec.resources sets none (empty: none)")
	f.Var(quantity{&opts.WorkspaceEphemeralStorageLimit}, "workspace-ephemeral-storage-limit", "kubernetes runtime: the workspace pods' ephemeral-storage limit where the Workspace's spec.resources sets none (empty: none)")
	f.StringVar(&serviceAccount, "service-account", os.Getenv("POD_NAMESPACE")+"/stackyard", "the operator's own service account, namespace/name (kubernetes runtime)")
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
	f.StringVar(&pod, "pod", ownPod(), "this replica's own Pod, namespace/name (default: the POD_NAMESPACE and POD_NAME environment variables, from the downward API); "+
		"the leader labels it "+leader.Label+"=true and removes the label from the other replicas' Pods, so a Service that selects it reaches the leader (empty: no label)")
	f.StringSliceVar(&watchNamespaces, "watch-namespaces", nil, "comma-separated namespaces whose Stacks, Programs, Workspaces, Updates and pipelines the operator reconciles (empty: all namespaces)")
	f.StringVar(&shardName, "shard", "", "the shard this operator reconciles: the Stacks labelled "+shard.Label+"=<shard>, their Workspaces and Updates, under a leader election of its own (empty: the default shard, which also runs Programs, pipelines, notifications, the dashboard and the APIs)")
	f.StringSliceVar(&shards, "shards", nil, "comma-separated names of every named shard of the installation: the default shard leaves their Stacks alone and reconciles every other one, an unknown shard label included (empty: the default shard reconciles every Stack)")
	f.DurationVar(&opts.IdleAfter, "idle-after", time.Minute, "stop a workspace agent after this long without pending operations")
	f.DurationVar(&opts.OperationTimeout, "operation-timeout", 0, "cancel a Pulumi operation that runs longer than this and fail its Update (0: no bound beyond the program's customTimeouts)")
	f.DurationVar(&opts.StallAfter, "stall-after", sreconcile.DefaultStallAfter, "mark an object Stalled once the same failure (an API call, a missing Secret) has lasted this long")
	f.IntVar(&opts.WarmAgents, "warm-agents", local.DefaultWarmAgents, "local runtime: agents kept pre-started while agents are being started, so that a Workspace's agent start does not wait for a process to start; they hold no place of --max-agents, and go 2 minutes after the last start (0: none)")
	f.IntVar(&opts.MaxAgents, "max-agents", local.DefaultMaxAgents(), "local runtime: agents (and so operations) running at once; more wait their turn, first come first served (0: unbounded; default: 2 per usable core, at most one per 256 MiB of memory, within the container's limits)")
	f.StringVar(&opts.Webhook.Addr, "webhook-bind-address", "0", `admission webhook that records who edited a governed Stack, e.g. ":9443" ("0" disables)`)
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
