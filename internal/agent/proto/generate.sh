#!/usr/bin/env bash
# generate.sh OUTDIR
#
# Compiles agent.proto into OUTDIR (the committed copy lives in
# internal/agent/agentpb). `make generate-proto` and the staleness test in
# internal/agent/agentpb both call it, so there is one way to generate.
# protoc comes from PATH; the Go plugins from the repository's bin/, built
# from the pinned module tools/proto.
set -euo pipefail
out=${1:?usage: generate.sh OUTDIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(cd "$here/../../.." && pwd)/bin
command -v protoc >/dev/null || { echo "protoc not found: run 'make protoc' (installs Debian's protobuf-compiler)" >&2; exit 1; }
for p in protoc-gen-go protoc-gen-go-grpc; do
  [[ -x "$bin/$p" ]] || { echo "$bin/$p not found: run 'make tools'" >&2; exit 1; }
done
mkdir -p "$out"
protoc -I "$here" \
  --plugin=protoc-gen-go="$bin/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  agent.proto
