# Shared settings of hack/cluster/up.sh and down.sh (sourced, not run).
# Every value can be set from the environment; docs/cluster.md lists them.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:-$REPO_ROOT/bin}
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/stackyard-cluster}
NODE_NAME=${NODE_NAME:-stackyard-node}
ETCD_PORT=${ETCD_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-12380}
APISERVER_PORT=${APISERVER_PORT:-16443}
KUBELET_PORT=${KUBELET_PORT:-10250}
SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/12}
SERVICE_IP=${SERVICE_IP:-10.96.0.1}
POD_CIDR=${POD_CIDR:-10.88.0.0/16}
CNI_BRIDGE=${CNI_BRIDGE:-stackyard0}
CNI_NETWORK=${CNI_NETWORK:-stackyard}
SANDBOX_IMAGE=${SANDBOX_IMAGE:-stackyard.test/pause:1}
HELLO_IMAGE=${HELLO_IMAGE:-stackyard.test/hello:1}
STORAGE_CLASS=${STORAGE_CLASS:-stackyard-test-local}
CLUSTER_DOMAIN=${CLUSTER_DOMAIN:-cluster.local}
DNS_PORT=${DNS_PORT:-53}
DNS_HEALTH_PORT=${DNS_HEALTH_PORT:-10253}
KUBE_PROXY_HEALTH_PORT=${KUBE_PROXY_HEALTH_PORT:-10256}

# The order components start in; down.sh stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy coredns containerd kubelet local-provisioner)

PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
PIDS=$CLUSTER_DIR/pids
RUN=$CLUSTER_DIR/run
CONTAINERD_SOCK=$RUN/containerd.sock
# A marker that down.sh checks before it removes anything.
MARKER=$CLUSTER_DIR/.stackyard-cluster

log() { echo ">> cluster: $*" >&2; }
die() { echo "!! cluster: $*" >&2; exit 1; }

# pid_of NAME: the recorded PID of a component if that process still runs.
# A zombie (killed, not yet reaped: PID 1 of some sandboxes never reaps) does
# not count.
pid_of() {
	local f=$PIDS/$1.pid pid state
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ $state != Z ]] && echo "$pid"
}

ctr_() { "$BIN/ctr" --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }
