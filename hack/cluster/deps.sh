#!/usr/bin/env bash
# deps.sh: the one C library the test cluster's build needs, libseccomp's
# headers (Debian's libseccomp-dev), for runc built with the seccomp tag.
# containerd always gives the pod sandbox the RuntimeDefault seccomp profile,
# and a runc without seccomp refuses it ("seccomp: config provided but
# seccomp not supported"), so no pod could start without it.
set -euo pipefail
if [[ -f /usr/include/seccomp.h ]]; then
	exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
	echo "!! libseccomp's headers are missing: install Debian's libseccomp-dev" >&2
	exit 1
fi
echo ">> installing libseccomp-dev (runc's seccomp support)" >&2
if ! apt-get install -y --no-install-recommends libseccomp-dev >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends libseccomp-dev >/dev/null
fi
