#!/usr/bin/env bash
# Lists the processes still running whose command line names the given
# state directory (etcd, kube-apiserver, workspace agents of `make dev`),
# and exits 1 if there are any: nothing `make dev` started may outlive it.
set -euo pipefail
dir=${1:?usage: hack/dev-leftovers.sh STATE_DIR}
found=0
for proc in /proc/[0-9]*; do
	[[ $proc == "/proc/$$" ]] && continue
	cmdline=$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null) || continue
	[[ $cmdline == *"$dir"* ]] || continue
	state=$(awk '{print $3}' "$proc/stat" 2>/dev/null) || continue
	[[ $state == Z ]] && continue # exited; only waiting to be reaped
	echo "still running: pid ${proc#/proc/}: $cmdline" >&2
	found=1
done
exit $found
