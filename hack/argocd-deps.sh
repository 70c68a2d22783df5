#!/usr/bin/env bash
# argocd-deps.sh: the Debian package the GitOps suite's Argo CD needs beyond
# Go modules: redis-server, the cache Argo CD's application controller and
# repo server share (a real Argo CD runs the redis image; test/argocdrun
# runs Debian's on a unix socket).
set -euo pipefail
if command -v redis-server >/dev/null || [[ -x /usr/bin/redis-server ]]; then
	exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
	echo "!! missing the Debian package redis-server; install it" >&2
	exit 1
fi
echo ">> installing redis-server" >&2
if ! apt-get install -y --no-install-recommends redis-server >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends redis-server >/dev/null
fi
