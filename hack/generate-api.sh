#!/usr/bin/env bash
# generate-api.sh [ROOT]
#
# Regenerates everything derived from the API types under ROOT (default: the
# repository): deepcopy functions beside the types, CRDs in config/crd/bases,
# the manager's RBAC role in config/rbac and, from the CRDs,
# docs/api-reference.md. `make generate` runs it on the repository; the
# staleness test runs it on a copy and compares, so both use exactly these
# arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-$here}
gen=${CONTROLLER_GEN:-$here/bin/controller-gen}
cd "$root"
"$gen" object:headerFile=hack/boilerplate.go.txt paths=./api/...
"$gen" crd paths=./api/... output:crd:artifacts:config=config/crd/bases
if [ -d internal/controller ]; then
  "$gen" rbac:roleName=stackyard-manager paths="./internal/controller/...;./internal/runtime/...;./internal/operator/...;./internal/dashboard/..." output:rbac:artifacts:config=config/rbac
fi
if [ -d hack/apiref ]; then
  go run ./hack/apiref config/crd/bases docs/api-reference.md
fi
