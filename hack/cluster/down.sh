#!/usr/bin/env bash
# down.sh: stop the test cluster that hack/cluster/up.sh started and remove
# $CLUSTER_DIR. Safe to run again, or after a failed up.sh.
#
# Order: kubelet first (so it restarts nothing), then every container process
# (found through the kubelet's cgroups) and every shim (their PID files under
# containerd's state), then containerd and the control plane in reverse start
# order. Then it unmounts what containerd and the kubelet mounted under
# $CLUSTER_DIR (overlay rootfs, shm, network namespaces, volumes), deletes
# the CNI bridge and the kubelet's cgroups, and removes the directory.
set -uo pipefail
# shellcheck source=hack/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) == 0 ]] || die "must run as root"
if [[ ! -d $CLUSTER_DIR ]]; then
	log "nothing to do: $CLUSTER_DIR does not exist"
	exit 0
fi
[[ -f $MARKER ]] || die "$CLUSTER_DIR has no $(basename "$MARKER"): not removing a directory up.sh did not make"

# stop_pid PID: SIGTERM, wait up to 10s, then SIGKILL.
stop_pid() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 40; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	kill -KILL "$pid" 2>/dev/null
	sleep 0.25
}

stop_component() {
	local pid
	if pid=$(pid_of "$1"); then
		log "stopping $1 (pid $pid)"
		stop_pid "$pid"
	fi
	rm -f "$PIDS/$1.pid"
}

# The kubelet's cgroups, deepest first: /sys/fs/cgroup/<controller>/kubepods/...
kubepods_cgroups() {
	local root
	for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[[ -d $root ]] && find "$root" -depth -type d
	done
}

stop_component kubelet

# Every process in a pod: the kubelet's cgroups hold them all.
pids=()
while read -r cg; do
	[[ -f $cg/cgroup.procs ]] || continue
	while read -r pid; do
		[[ -n $pid ]] && pids+=("$pid")
	done <"$cg/cgroup.procs"
done < <(kubepods_cgroups)
if ((${#pids[@]})); then
	log "killing ${#pids[@]} container processes"
	kill -KILL "${pids[@]}" 2>/dev/null
fi
# Every shim this containerd started: a containerd-shim-runc-v2 whose
# -address is this cluster's containerd socket (they outlive containerd).
shim_pids() {
	local d args
	for d in /proc/[0-9]*; do
		args=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
		[[ $args == *containerd-shim-runc-v2\ * && $args == *" -address $CONTAINERD_SOCK "* ]] && echo "${d#/proc/}"
	done
}
while read -r pid; do
	[[ -n $pid ]] && stop_pid "$pid"
done < <(shim_pids)

for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
	[[ ${COMPONENTS[i]} == kubelet ]] || stop_component "${COMPONENTS[i]}"
done

# Unmount everything under the state directory, deepest first; a busy mount
# is detached lazily so the directory can still go.
dir=$(realpath "$CLUSTER_DIR")
mapfile -t mounts < <(awk -v d="$dir" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
if ((${#mounts[@]})); then
	log "unmounting ${#mounts[@]} mounts under $dir"
	for m in "${mounts[@]}"; do
		# mountinfo escapes spaces and the like as octal.
		m=$(printf '%b' "$m")
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "!! cluster: cannot unmount $m" >&2
	done
fi

# kube-proxy's nftables tables (it keeps everything in its own tables).
if command -v nft >/dev/null; then
	for fam in ip ip6; do
		nft list table "$fam" kube-proxy >/dev/null 2>&1 && nft delete table "$fam" kube-proxy
	done
fi
# The bridge the CNI plugin made, the CNI result cache of our network, and
# the cgroups the kubelet and containerd made.
ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && ip link delete "$CNI_BRIDGE"
rm -rf /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null
for d in "$CLUSTER_DIR"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
	[[ -d $d ]] && rm -f "/var/lib/cni/results/cni-loopback-$(basename "$d")-lo"
done
# The shims' socket directory (fixed by containerd) and the CNI cache, when
# nothing else left anything in them.
rmdir /run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni 2>/dev/null
while read -r cg; do
	rmdir "$cg" 2>/dev/null || echo "!! cluster: cannot remove cgroup $cg" >&2
done < <(kubepods_cgroups)

rm -rf "$CLUSTER_DIR" || die "could not remove $CLUSTER_DIR"
log "down: $CLUSTER_DIR removed"
