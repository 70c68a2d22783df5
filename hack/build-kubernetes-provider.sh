#!/usr/bin/env bash
# build-kubernetes-provider.sh OUTPUT
#
# Builds Pulumi's Kubernetes provider from its Go module, as pinned in
# tools/pulumi-kubernetes/go.mod. The module ships schema.json and
# terraform-mapping.json but not the minified copies its main package
# embeds, so this derives them first (tools/pulumi-kubernetes/cmd/
# embed-schema, as the provider's own generate.go would), then builds our
# main package, which serves the provider exactly as the module's does. The
# plugin's version is the module's version without the v: a pseudo-version
# reads as the prerelease 4.0.0-<date>-<commit>.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")/.." && pwd)
mod=github.com/pulumi/pulumi-kubernetes/provider/v4
cd "$here/tools/pulumi-kubernetes"
src=$(go list -m -f '{{.Dir}}' "$mod")
version=$(go list -m -f '{{.Version}}' "$mod")
if [ -z "$src" ] || [ ! -f "$src/cmd/pulumi-resource-kubernetes/schema.json" ]; then
  go mod download "$mod"
  src=$(go list -m -f '{{.Dir}}' "$mod")
fi
go run ./cmd/embed-schema "$src/cmd/pulumi-resource-kubernetes" cmd/pulumi-resource-kubernetes "${version#v}"
cd "$here"
hack/build-tool.sh tools/pulumi-kubernetes "$out" ./cmd/pulumi-resource-kubernetes \
  -ldflags "-X $mod/pkg/version.Version=${version#v}"
