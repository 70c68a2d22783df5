#!/usr/bin/env bash
# up.sh: start the single-node test cluster (docs/cluster.md).
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy
# (nftables), CoreDNS, containerd (runc, CNI bridge) and kubelet, all from
# bin/ (make cluster-tools), all state
# under $CLUSTER_DIR (default /tmp/stackyard-cluster): certificates in pki/,
# one log per component in logs/, PIDs in pids/, the admin kubeconfig at
# $CLUSTER_DIR/kubeconfig. It builds a pause image and a hello image from the
# Go programs beside it and imports them (and dist/images/*.tar if present)
# into containerd. It returns when the node is Ready. Needs root.
# hack/cluster/down.sh stops everything and removes $CLUSTER_DIR.
set -Eeuo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) == 0 ]] || die "must run as root (containerd, runc and kubelet need it)"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy coredns \
	containerd containerd-shim-runc-v2 ctr runc cni/bridge cni/host-local cni/loopback cni/portmap; do
	[[ -x $BIN/$b ]] || die "$BIN/$b is missing: run 'make cluster-tools'"
done
command -v nft >/dev/null || die "nft is missing (kube-proxy's nftables mode): run hack/cluster/deps.sh"
if [[ -d $CLUSTER_DIR ]]; then
	# A live cluster belongs to someone else (another run on this machine):
	# refuse with exit code 3, which tells test-cluster not to tear it down.
	for c in "${COMPONENTS[@]}"; do
		if pid_of "$c" >/dev/null; then
			echo "!! cluster: $c is already running from $CLUSTER_DIR: run hack/cluster/down.sh first" >&2
			exit 3
		fi
	done
	[[ -f $MARKER ]] || die "$CLUSTER_DIR exists and is not a test cluster's directory"
	# Nothing of it runs: a run that was killed left it. Clean it up (its
	# containers, mounts and cgroups too) and start afresh.
	log "$CLUSTER_DIR is left over from an earlier run that was stopped; cleaning it up"
	"$(dirname "${BASH_SOURCE[0]}")/down.sh" || die "could not clean up $CLUSTER_DIR: run hack/cluster/down.sh"
fi

start_time=$(date +%s)
NODE_IP=${NODE_IP:-$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i+1); exit}}')}
NODE_IP=${NODE_IP:-127.0.0.1}
export PATH=$BIN:$PATH

mkdir -p "$PKI" "$LOGS" "$PIDS" "$RUN" "$CLUSTER_DIR/images" "$CLUSTER_DIR/cni/net.d"
touch "$MARKER"

on_error() {
	echo "!! cluster: start failed; last lines of each log:" >&2
	for f in "$LOGS"/*.log; do
		[[ -f $f ]] || continue
		echo "---- $f" >&2
		tail -n 15 "$f" >&2
	done
	echo "!! cluster: logs stay in $LOGS; hack/cluster/down.sh removes everything" >&2
}
trap on_error ERR

# wait_for WHAT SECONDS COMMAND...: poll COMMAND until it succeeds.
wait_for() {
	local what=$1 timeout=$2 i
	shift 2
	for ((i = 0; i < timeout * 2; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	echo "!! cluster: timed out after ${timeout}s waiting for $what" >&2
	return 1
}

# start NAME COMMAND...: run a component in its own session, log and PID recorded.
start() {
	local name=$1
	shift
	log "starting $name"
	setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$PIDS/$name.pid"
}

# ---- certificates -----------------------------------------------------------
# One CA signs everything; the identities are the ones Kubernetes' built-in
# RBAC roles and the Node authorizer expect.
log "certificates in $PKI (node $NODE_NAME, IP $NODE_IP)"
ossl() { openssl "$@" 2>>"$LOGS/openssl.log"; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
	-keyout "$PKI/ca.key" -out "$PKI/ca.crt" -subj "/CN=stackyard-test-cluster-ca"
# cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]
cert() {
	local name=$1 subj=$2 eku=$3 san=${4:-}
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj"
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[[ -z $san ]] || echo "subjectAltName=$san"
	} >"$PKI/$name.ext"
	ossl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt"
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
	"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE_NAME,IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP"
cert apiserver-kubelet-client "/O=kubeadm:cluster-admins/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=stackyard-test-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
cert coredns "/CN=system:coredns" clientAuth
ossl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key"
ossl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

# kubeconfig FILE CERT_NAME
kubeconfig() {
	local file=$1 name=$2
	kubectl config --kubeconfig "$file" set-cluster stackyard-test --embed-certs \
		--certificate-authority "$PKI/ca.crt" --server "https://$NODE_IP:$APISERVER_PORT" >/dev/null
	kubectl config --kubeconfig "$file" set-credentials "$name" --embed-certs \
		--client-certificate "$PKI/$name.crt" --client-key "$PKI/$name.key" >/dev/null
	kubectl config --kubeconfig "$file" set-context stackyard-test --cluster stackyard-test --user "$name" >/dev/null
	kubectl config --kubeconfig "$file" use-context stackyard-test >/dev/null
}
kubeconfig "$CLUSTER_DIR/kubeconfig" admin
for n in controller-manager scheduler kubelet kube-proxy coredns; do
	kubeconfig "$CLUSTER_DIR/$n.kubeconfig" "$n"
done
KUBECTL=(kubectl --kubeconfig "$CLUSTER_DIR/kubeconfig")

# ---- control plane ----------------------------------------------------------
start etcd "$BIN/etcd" --name stackyard-test --data-dir "$CLUSTER_DIR/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "stackyard-test=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync
wait_for etcd 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

start kube-apiserver "$BIN/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
	--bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$NODE_IP" \
	--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
	--client-ca-file "$PKI/ca.crt" \
	--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types InternalIP,Hostname \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--service-cluster-ip-range "$SERVICE_CIDR" \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
	--allow-privileged=true --profiling=false --cert-dir "$PKI/apiserver-generated"
wait_for kube-apiserver 90 "${KUBECTL[@]}" get --raw /readyz

start kube-controller-manager "$BIN/kube-controller-manager" \
	--kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --cluster-name stackyard-test \
	--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
	--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
	--use-service-account-credentials=true --service-cluster-ip-range "$SERVICE_CIDR" \
	--cert-dir "$PKI/controller-manager-generated"

start kube-scheduler "$BIN/kube-scheduler" \
	--kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
	--authentication-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
	--authorization-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --cert-dir "$PKI/scheduler-generated"

# ---- services: kube-proxy ---------------------------------------------------
# nftables mode (Debian's nft; the machines have no iptables). masqueradeAll:
# the pods share one bridge and the host has no br_netfilter, so the reply
# of a pod to a Service connection from a pod on the same bridge would skip
# the host's conntrack; masquerading every Service connection brings the
# replies back through the host.
mkdir -p "$CLUSTER_DIR/kube-proxy"
cat >"$CLUSTER_DIR/kube-proxy/config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: $CLUSTER_DIR/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTH_PORT
metricsBindAddress: 127.0.0.1:10249
masqueradeAll: true
# Leave the host's conntrack sysctls alone.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
start kube-proxy "$BIN/kube-proxy" --config "$CLUSTER_DIR/kube-proxy/config.yaml"

# ---- cluster DNS: CoreDNS ---------------------------------------------------
# A host process on the node's IP (pods reach it there, as they reach the
# API server), the kubernetes plugin watching the API server as
# system:coredns; other names go to the host's resolvers.
"${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:coredns
EOF
mkdir -p "$CLUSTER_DIR/coredns"
cat >"$CLUSTER_DIR/coredns/Corefile" <<EOF
.:$DNS_PORT {
    bind $NODE_IP
    errors
    health 127.0.0.1:$DNS_HEALTH_PORT
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $CLUSTER_DIR/coredns.kubeconfig stackyard-test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    forward . /etc/resolv.conf
    cache 5
}
EOF
start coredns "$BIN/coredns" -conf "$CLUSTER_DIR/coredns/Corefile"
wait_for coredns 30 curl -fsS "http://127.0.0.1:$DNS_HEALTH_PORT/health"

# ---- containerd -------------------------------------------------------------
mkdir -p "$CLUSTER_DIR/containerd" "$CLUSTER_DIR/cni/ipam"
cat >"$CLUSTER_DIR/containerd/config.toml" <<EOF
version = 3
root = "$CLUSTER_DIR/containerd/root"
state = "$CLUSTER_DIR/containerd/state"

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = "$RUN/containerd-debug.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_DIR/containerd/opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$SANDBOX_IMAGE"

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  # The machines withhold CAP_SYS_RESOURCE, so no process may lower its
  # oom_score_adj below 0, and runc fails on the -998 CRI gives a sandbox
  # ("nsexec: failed to update /proc/self/oom_score_adj: Permission denied").
  # This clamps every score to containerd's own (0) or above.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$BIN/runc"
        Root = "$RUN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$BIN/cni"]
    conf_dir = "$CLUSTER_DIR/cni/net.d"
EOF
# A bridge with host-local addresses; no masquerade (no iptables here, and
# the machine has no outside network anyway).
cat >"$CLUSTER_DIR/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start containerd "$BIN/containerd" --config "$CLUSTER_DIR/containerd/config.toml"
wait_for containerd 30 "$BIN/ctr" --address "$CONTAINERD_SOCK" version

# ---- images -----------------------------------------------------------------
# No registry is reachable: the sandbox (pause) image and the smoke-test image
# are built here from static Go programs and imported.
log "building and importing $SANDBOX_IMAGE and $HELLO_IMAGE"
img=$CLUSTER_DIR/images
(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$img/" \
	./hack/cluster/pause ./hack/cluster/hello ./hack/cluster/mkimage ./hack/cluster/provisioner)
"$img/mkimage" -out "$img/pause.tar" -ref "$SANDBOX_IMAGE" -file "$img/pause:/pause" -entrypoint /pause
"$img/mkimage" -out "$img/hello.tar" -ref "$HELLO_IMAGE" -file "$img/hello:/hello" -entrypoint /hello
ctr_ images import "$img/pause.tar" >>"$LOGS/images.log" 2>&1
ctr_ images import "$img/hello.tar" >>"$LOGS/images.log" 2>&1
for t in ${IMPORT_IMAGES-"$REPO_ROOT"/dist/images/*.tar}; do
	[[ -f $t ]] || continue
	log "importing $t"
	ctr_ images import "$t" >>"$LOGS/images.log" 2>&1
done

# ---- kubelet ----------------------------------------------------------------
mkdir -p "$CLUSTER_DIR/kubelet" "$CLUSTER_DIR/pod-logs"
cat >"$CLUSTER_DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# The machines have cgroup v1 only (cgroup2 is mounted as 'unified' but has no
# controllers); kubelet 1.35 refuses cgroup v1 unless told not to.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
podLogsDir: $CLUSTER_DIR/pod-logs
volumePluginDir: $CLUSTER_DIR/kubelet/volume-plugins
clusterDomain: $CLUSTER_DOMAIN
clusterDNS:
- $NODE_IP
# The apiserver's kubelet client certificate is signed by the cluster CA;
# nothing else talks to the kubelet.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: AlwaysAllow
# Never garbage-collect the imported images (nothing can be pulled back) and
# never evict on a full-ish shared disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
registerNode: true
EOF
start kubelet "$BIN/kubelet" --config "$CLUSTER_DIR/kubelet/config.yaml" \
	--kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" --root-dir "$CLUSTER_DIR/kubelet" \
	--cert-dir "$CLUSTER_DIR/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 2
wait_for "node $NODE_NAME to register" 90 "${KUBECTL[@]}" get node "$NODE_NAME"
wait_for "node $NODE_NAME to be Ready" 120 "${KUBECTL[@]}" wait --for=condition=Ready --timeout=2s node "$NODE_NAME"
# The controller manager creates the default service account once it runs.
wait_for "the default service account" 60 "${KUBECTL[@]}" -n default get serviceaccount default
wait_for kube-proxy 30 curl -fsS "http://127.0.0.1:$KUBE_PROXY_HEALTH_PORT/healthz"

# ---- storage ----------------------------------------------------------------
# A default StorageClass whose claims become hostPath volumes under
# $CLUSTER_DIR/volumes, as kind's and k3s's local-path classes do.
"${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: stackyard.test/local
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
start local-provisioner "$img/provisioner" --kubeconfig "$CLUSTER_DIR/kubeconfig" \
	--class "$STORAGE_CLASS" --root "$CLUSTER_DIR/volumes"

trap - ERR
log "up in $(($(date +%s) - start_time))s: export KUBECONFIG=$CLUSTER_DIR/kubeconfig"
