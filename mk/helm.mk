# The Helm chart (deploy/helm/stackyard) and the helm binary that lints and
# renders it in test/helm.
#
# Helm is built from the pinned module tools/helm like the other tools. Its
# reported version and the Kubernetes version it assumes when rendering
# without a cluster (.Capabilities.KubeVersion of `helm template` and
# `helm lint`) are link-time values, as in Helm's own release builds: the
# first is read from the pin, the second is KUBE_VERSION, the API server the
# tests run against.
#
# The chart never restates what config/ holds. `make generate` copies into
# its files/ the CRDs (config/crd/bases), the manager's ClusterRole
# (config/rbac/role.yaml), the leader election Role
# (config/rbac/leader_election_role.yaml) and the admission policies
# (config/policy), which its templates read; test/helm fails when a copy
# differs from its source.

HELM := $(BIN)/helm
HELM_CHART := deploy/helm/stackyard

TOOLS += $(HELM)
GENERATE_TARGETS += generate-helm
TEST_DEPS += $(HELM)

# Recursive ('='), so the go command runs only when helm is built.
HELM_VERSION = $(shell cd tools/helm && go list -m -f '{{.Version}}' helm.sh/helm/v3)
HELM_KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
HELM_LDFLAGS = -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
	$(foreach pkg,helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules,\
		-X $(pkg).k8sVersionMajor=1 -X $(pkg).k8sVersionMinor=$(HELM_KUBE_MINOR))

$(HELM): tools/helm/go.mod tools/helm/go.sum
	@$(BUILD_TOOL) tools/helm $@ helm.sh/helm/v3/cmd/helm -ldflags "$(HELM_LDFLAGS)"

##@ Helm

# It depends on generate-api, so the chart's copies never lag one
# generation behind an API or marker change.
.PHONY: generate-helm
generate-helm: generate-api ## Copy the generated CRDs, the ClusterRole, the people's roles and the admission policies into the Helm chart.
	@set -euo pipefail; \
	for d in crds rbac policy people; do rm -rf $(HELM_CHART)/files/$$d; mkdir -p $(HELM_CHART)/files/$$d; done; \
	install -m 0644 config/crd/bases/*.yaml $(HELM_CHART)/files/crds/; \
	install -m 0644 config/rbac/role.yaml config/rbac/leader_election_role.yaml $(HELM_CHART)/files/rbac/; \
	install -m 0644 config/people/roles.yaml $(HELM_CHART)/files/people/; \
	for f in config/policy/*.yaml; do \
		[ "$$(basename $$f)" = kustomization.yaml ] || install -m 0644 $$f $(HELM_CHART)/files/policy/; \
	done
