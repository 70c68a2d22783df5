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
# A tool is run, never debugged here: it is built without DWARF (-s -w to
# the linker, -dwarf=false to the compiler), which spares the compile and
# above all the link a good part of their time (docs/development.md, "CI
# budget"). A panic still prints its stack. The caller's -ldflags keep
# their stamps, with -s -w in front.
args=() ldflags_seen=
while (($#)); do
	case $1 in
	-ldflags) args+=(-ldflags "-s -w $2"); ldflags_seen=1; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
[ -n "$ldflags_seen" ] || args+=(-ldflags "-s -w")
# A tool that needs cgo (Gitea, for SQLite) sets TOOL_CGO=1.
( cd "$moddir" && CGO_ENABLED=${TOOL_CGO:-0} go build -trimpath -gcflags=all=-dwarf=false "${args[@]}" -o "$tmp" "$pkg" )
mv -f "$tmp" "$out"
echo ">> built $(basename "$out") in $(( $(date +%s) - start ))s" >&2
