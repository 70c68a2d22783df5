#!/usr/bin/env bash
# version-ldflags.sh [VERSION]
#
# Prints the -ldflags values that stamp stackyard with its version, the
# commit it is built from (-dirty when the tree has uncommitted changes) and
# that commit's date. Explicit stamps work where the Go toolchain's own VCS
# stamping does not (GOFLAGS=-buildvcs=false, git worktrees).
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=github.com/stackyard/stackyard/internal/cli
version=${1:-dev}
commit=$(git rev-parse HEAD 2>/dev/null || true)
if [ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
date=$(git log -1 --format=%cI 2>/dev/null || true)
printf -- '-X %s.Version=%s -X %s.Commit=%s -X %s.BuildDate=%s' "$pkg" "$version" "$pkg" "$commit" "$pkg" "$date"
