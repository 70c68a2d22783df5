# Test cluster: a real single-node Kubernetes cluster on this machine, built
# from Go modules like every other tool (docs/cluster.md).
#
#   control plane: bin/etcd, bin/kube-apiserver (Makefile), bin/kube-scheduler
#                  (tools/kube), bin/kube-controller-manager (tools/node/kube)
#   node:          bin/kubelet, bin/kube-proxy (tools/node/kube), bin/containerd,
#                  bin/containerd-shim-runc-v2, bin/ctr, bin/runc and the CNI
#                  plugins in bin/cni (tools/node)
#   cluster DNS:   bin/coredns (tools/node/coredns), a host process
#
# tools/node/kube pins the same k8s.io/kubernetes release as tools/kube, with
# the same replace block; it is a module of its own only because tools/kube's
# go.sum lacks the kubelet's and the controller manager's dependencies.
#
# Only kube-controller-manager is a prerequisite of `make test`: test/policy
# runs its clusterrole-aggregation controller alone against the test API
# server (TestPeopleRolesAggregated). `make test-cluster` starts the cluster,
# runs the suites tagged `cluster` and always tears it down; in CI it finds
# kube-controller-manager already built.

KUBELET := $(BIN)/kubelet
KUBE_CONTROLLER_MANAGER := $(BIN)/kube-controller-manager
KUBE_SCHEDULER := $(BIN)/kube-scheduler
KUBE_PROXY := $(BIN)/kube-proxy
COREDNS := $(BIN)/coredns
CONTAINERD := $(BIN)/containerd
CONTAINERD_SHIM := $(BIN)/containerd-shim-runc-v2
CTR := $(BIN)/ctr
RUNC := $(BIN)/runc
CNI_BIN_DIR := $(BIN)/cni
CNI_PLUGINS := $(addprefix $(CNI_BIN_DIR)/,bridge host-local loopback portmap)

# Stamped versions; they must match tools/node/go.mod.
CONTAINERD_VERSION := v2.4.2
RUNC_VERSION := v1.5.2
CNI_PLUGINS_VERSION := v1.9.1
COREDNS_VERSION := $(shell awk '$$1 == "github.com/coredns/coredns" {print $$2}' tools/node/coredns/go.mod 2>/dev/null)

# containerd: no btrfs (cgo and its headers) nor devmapper/zfs snapshotters;
# the cluster uses overlayfs.
CONTAINERD_TAGS := no_btrfs no_devmapper no_zfs
CONTAINERD_LDFLAGS := -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)
CNI_LDFLAGS := -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(CNI_PLUGINS_VERSION)
# runc needs cgo (libcontainer/nsenter) and seccomp: containerd gives every
# pod sandbox the RuntimeDefault profile, which a runc built without the
# seccomp tag refuses. It links libseccomp dynamically (Debian's libseccomp2
# at run time); hack/cluster/deps.sh installs libseccomp-dev to build it.
RUNC_TAGS ?= seccomp urfave_cli_no_docs

NODE_TOOLS := $(KUBELET) $(KUBE_PROXY) $(COREDNS) $(CONTAINERD) $(CONTAINERD_SHIM) $(CTR) $(RUNC) $(CNI_PLUGINS)
CLUSTER_TOOLS := $(CONTROL_PLANE_TOOLS) $(KUBE_CONTROLLER_MANAGER) $(KUBE_SCHEDULER) $(NODE_TOOLS)

TEST_DEPS += $(KUBE_CONTROLLER_MANAGER)

CLUSTER_DIR ?= /tmp/stackyard-cluster
export CLUSTER_DIR

##@ Test cluster

.PHONY: cluster-tools cluster-up cluster-down test-cluster
cluster-tools: $(CLUSTER_TOOLS) ## Build the test cluster's binaries into bin/ (first time ~9 min on 2 cores once kube-apiserver is built; CoreDNS ~4 of them).

cluster-up: $(CLUSTER_TOOLS) ## Start the single-node test cluster (root; state in $CLUSTER_DIR).
	BIN=$(BIN) hack/cluster/up.sh

cluster-down: ## Stop the test cluster and remove $CLUSTER_DIR.
	hack/cluster/down.sh

test-cluster: $(CLUSTER_TOOLS) $(BIN)/helm $(BIN)/pulumi-resource-kubernetes images ## Build the images, start the test cluster, run the `cluster` suites, always tear it down.
	@set -e; status=0; \
	BIN=$(BIN) hack/cluster/up.sh || status=$$?; \
	if [ $$status -eq 0 ]; then \
		KUBECONFIG=$(CLUSTER_DIR)/kubeconfig go test $(GO_TEST_FLAGS) -tags cluster -timeout $(TEST_TIMEOUT) ./test/cluster/... || status=$$?; \
	fi; \
	if [ $$status -ne 3 ]; then hack/cluster/down.sh || true; fi; \
	exit $$status

$(KUBE_SCHEDULER): tools/kube/go.mod tools/kube/go.sum
	@$(BUILD_TOOL) tools/kube $@ k8s.io/kubernetes/cmd/kube-scheduler -ldflags "$(KUBE_LDFLAGS)"

$(KUBE_CONTROLLER_MANAGER): tools/node/kube/go.mod tools/node/kube/go.sum
	@$(BUILD_TOOL) tools/node/kube $@ k8s.io/kubernetes/cmd/kube-controller-manager -ldflags "$(KUBE_LDFLAGS)"

$(KUBELET): tools/node/kube/go.mod tools/node/kube/go.sum
	@$(BUILD_TOOL) tools/node/kube $@ k8s.io/kubernetes/cmd/kubelet -ldflags "$(KUBE_LDFLAGS)"

# kube-proxy runs in nftables mode, which drives Debian's nft binary
# (hack/cluster/deps.sh installs the nftables package).
$(KUBE_PROXY): tools/node/kube/go.mod tools/node/kube/go.sum
	@hack/cluster/deps.sh
	@$(BUILD_TOOL) tools/node/kube $@ k8s.io/kubernetes/cmd/kube-proxy -ldflags "$(KUBE_LDFLAGS)"

# CoreDNS runs as a host process on the node's IP: the cluster DNS (up.sh).
$(COREDNS): tools/node/coredns/go.mod tools/node/coredns/go.sum
	@$(BUILD_TOOL) tools/node/coredns $@ github.com/coredns/coredns \
		-ldflags "-X github.com/coredns/coredns/coremain.GitCommit=$(COREDNS_VERSION)"

$(CONTAINERD): tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containerd/containerd/v2/cmd/containerd \
		-tags "$(CONTAINERD_TAGS)" -ldflags "$(CONTAINERD_LDFLAGS)"

$(CONTAINERD_SHIM): tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		-tags "$(CONTAINERD_TAGS)" -ldflags "$(CONTAINERD_LDFLAGS)"

$(CTR): tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containerd/containerd/v2/cmd/ctr \
		-tags "$(CONTAINERD_TAGS)" -ldflags "$(CONTAINERD_LDFLAGS)"

# hack/build-tool.sh builds with CGO_ENABLED=0; runc needs cgo.
$(RUNC): tools/node/go.mod tools/node/go.sum
	@hack/cluster/deps.sh
	@CGO_ENABLED=1 hack/cluster/build-cgo-tool.sh tools/node $@ github.com/opencontainers/runc \
		-tags "$(RUNC_TAGS)" -ldflags "-X main.gitCommit=$(RUNC_VERSION)"

$(CNI_BIN_DIR)/bridge: tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containernetworking/plugins/plugins/main/bridge -ldflags "$(CNI_LDFLAGS)"

$(CNI_BIN_DIR)/loopback: tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containernetworking/plugins/plugins/main/loopback -ldflags "$(CNI_LDFLAGS)"

$(CNI_BIN_DIR)/host-local: tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containernetworking/plugins/plugins/ipam/host-local -ldflags "$(CNI_LDFLAGS)"

$(CNI_BIN_DIR)/portmap: tools/node/go.mod tools/node/go.sum
	@$(BUILD_TOOL) tools/node $@ github.com/containernetworking/plugins/plugins/meta/portmap -ldflags "$(CNI_LDFLAGS)"
