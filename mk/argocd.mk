# Argo CD's application controller and repo server, for the GitOps suite
# (test/argocdrun starts them as processes; test/gitops syncs Stacks with
# them). Everything comes from the Go module github.com/argoproj/argo-cd/v3,
# pinned in tools/argocd/go.mod, and from Debian's redis-server, which both
# components cache in (hack/argocd-deps.sh installs it):
#
#   bin/argocd         Argo CD's one binary: it runs as the component that
#                      ARGOCD_BINARY_NAME names (8.5 min and 2.3 GB on 2
#                      cores from an empty build cache)
#   bin/crds/argocd/   the Application and AppProject CRDs, copied from the
#                      module's manifests/crds
#   bin/argocd-path/   git-verify-wrapper.sh, which the repo server runs
#                      from PATH on every revision (Argo CD's image has it
#                      in /usr/local/bin), copied from the module's hack/
#
# argo-cd v3.6 needs Go 1.27: the module's go line says so, and
# ARGOCD_GOTOOLCHAIN names the release the go command fetches, for this
# build alone (the rest of the project builds with the local Go). None of
# it is part of `make tools`, `make test` or `.ci/run`: building Argo CD
# would take the cold CI run past its 60 minutes (docs/development.md, "CI
# budget"), so `make test-argocd` builds it and runs its test, on demand
# and before an issue that touches the Argo CD contract is resolved.

ARGOCD_MODULE := github.com/argoproj/argo-cd/v3
ARGOCD := $(BIN)/argocd
ARGOCD_CRDS_DIR := $(BIN)/crds/argocd
ARGOCD_CRDS := $(ARGOCD_CRDS_DIR)/.version
ARGOCD_GOTOOLCHAIN := go1.27.3
ARGOCD_VERSION = $(shell cd tools/argocd && GOTOOLCHAIN=$(ARGOCD_GOTOOLCHAIN) go list -m -f '{{.Version}}' $(ARGOCD_MODULE))

$(ARGOCD): tools/argocd/go.mod tools/argocd/go.sum
	@GOTOOLCHAIN=$(ARGOCD_GOTOOLCHAIN) $(BUILD_TOOL) tools/argocd $@ $(ARGOCD_MODULE)/cmd \
		-ldflags "-X $(ARGOCD_MODULE)/common.version=$(patsubst v%,%,$(ARGOCD_VERSION)) -X $(ARGOCD_MODULE)/common.gitTreeState=clean"

$(ARGOCD_CRDS): tools/argocd/go.mod tools/argocd/go.sum
	@echo ">> copying Argo CD's Application and AppProject CRDs and git-verify-wrapper.sh from $(ARGOCD_MODULE) (module tools/argocd) into $(ARGOCD_CRDS_DIR) and $(BIN)/argocd-path" >&2
	@set -euo pipefail; \
	dir=$$(cd tools/argocd && GOTOOLCHAIN=$(ARGOCD_GOTOOLCHAIN) go list -m -f '{{.Dir}}' $(ARGOCD_MODULE)); \
	if [ -z "$$dir" ] || [ ! -f "$$dir/manifests/crds/application-crd.yaml" ]; then \
		echo "!! $(ARGOCD_MODULE) has no manifests/crds in the module cache ($$dir)" >&2; exit 1; \
	fi; \
	tmp="$(ARGOCD_CRDS_DIR).tmp.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	install -m 0644 "$$dir/manifests/crds/application-crd.yaml" "$$dir/manifests/crds/appproject-crd.yaml" "$$tmp"/; \
	mkdir -p "$(BIN)/argocd-path"; install -m 0755 "$$dir/hack/git-verify-wrapper.sh" "$(BIN)/argocd-path/"; \
	echo "$(ARGOCD_MODULE) $$(basename "$$dir")" > "$$tmp/.version"; \
	rm -rf "$(ARGOCD_CRDS_DIR)"; mkdir -p "$(dir $(ARGOCD_CRDS_DIR))"; mv "$$tmp" "$(ARGOCD_CRDS_DIR)"

##@ Argo CD

.PHONY: argocd-tools
argocd-tools: $(ARGOCD) $(ARGOCD_CRDS) ## Build Argo CD from its Go module, copy its CRDs and install Debian's redis-server (for `make test-argocd`).
	@hack/argocd-deps.sh

# The Argo CD test of the GitOps suite (test/gitops, tags gitops and
# argocd): Argo CD's application controller and repo server sync Stack,
# Stage and Pipeline manifests from git, read Stacks' health with the
# shipped script and keep a promotion's pin (docs/argocd.md).
.PHONY: test-argocd
test-argocd: tools argocd-tools ## Sync stackyard manifests from git with Argo CD's real controllers (test/gitops TestArgoCDSync; not in CI).
	@$(STACKYARD_BINS)
	STACKYARD_TEST_PREBUILT=$(BIN) go test -tags gitops,argocd -count=1 -timeout 20m -v -run 'TestArgoCDSync' ./test/gitops/...
