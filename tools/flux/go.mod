module github.com/stackyard/stackyard/tools/flux

go 1.26.0

// Flux's source-controller is required only for the CRD manifests it ships
// in config/crd/bases; mk/flux.mk copies them from the module cache into
// bin/crds/flux for the tests that resolve Flux sources.
require github.com/fluxcd/source-controller v1.9.6
