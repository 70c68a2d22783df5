#!/usr/bin/env bash
# build-tool.sh MODULE_DIR OUTPUT PACKAGE [go build flags...]
#
# Builds one pinned tool binary from its own tools module (tools/<family>),
# so the main module never carries the tools' dependency graphs. Make calls it
# only when the module's go.mod/go.sum is newer than the binary, that is when a
# pin changed. Progress goes to stderr because a first build takes minutes.
set -euo pipefail
moddir=$1 out=$2 pkg=$3
shift 3
start=$(date +%s)
echo ">> building $(basename "$out") from $pkg (module $moddir) ..." >&2
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# A tool that needs cgo (Gitea, for SQLite) sets TOOL_CGO=1.
( cd "$moddir" && CGO_ENABLED=${TOOL_CGO:-0} go build -trimpath "$@" -o "$tmp" "$pkg" )
mv -f "$tmp" "$out"
echo ">> built $(basename "$out") in $(( $(date +%s) - start ))s" >&2
