#!/usr/bin/env bash
# build-cgo-tool.sh MODULE_DIR OUTPUT PACKAGE [go build flags...]
#
# hack/build-tool.sh for the one node tool that needs cgo: runc (its nsenter
# runs C code before the Go runtime starts). Same contract: the pinned module
# in MODULE_DIR, -trimpath, output written atomically, progress on stderr.
set -euo pipefail
moddir=$1 out=$2 pkg=$3
shift 3
start=$(date +%s)
echo ">> building $(basename "$out") from $pkg (module $moddir, cgo) ..." >&2
mkdir -p "$(dirname "$out")"
case $out in /*) ;; *) out=$PWD/$out ;; esac
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
( cd "$moddir" && CGO_ENABLED=1 go build -trimpath "$@" -o "$tmp" "$pkg" )
mv -f "$tmp" "$out"
echo ">> built $(basename "$out") in $(( $(date +%s) - start ))s" >&2
