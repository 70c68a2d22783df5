#!/usr/bin/env bash
# deps.sh: the Debian packages the test cluster needs beyond Go modules.
#
# - libseccomp-dev: libseccomp's headers, for runc built with the seccomp
#   tag. containerd always gives the pod sandbox the RuntimeDefault seccomp
#   profile, and a runc without seccomp refuses it ("seccomp: config provided
#   but seccomp not supported"), so no pod could start without it.
# - nftables: the nft binary, which kube-proxy's nftables mode drives (the
#   machines have no iptables either; nftables mode needs none).
set -euo pipefail
missing=()
[[ -f /usr/include/seccomp.h ]] || missing+=(libseccomp-dev)
command -v nft >/dev/null || [[ -x /usr/sbin/nft ]] || missing+=(nftables)
if ((${#missing[@]} == 0)); then
	exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
	echo "!! missing Debian packages: ${missing[*]}; install them" >&2
	exit 1
fi
echo ">> installing ${missing[*]}" >&2
if ! apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
