# Container images: the operator image and the agent (workspace) image,
# assembled from scratch by hack/image with go-containerregistry, without a
# container engine. docs/container-images.md says what is inside, how to load them
# into a cluster and what their digests depend on.
#
# Outputs in dist/images: stackyard-operator.tar and stackyard-agent.tar
# (docker-archive), stackyard-operator.oci and stackyard-agent.oci (one OCI
# layout each), oci (one OCI layout with both) and digests.txt.
#
# Every value below can be overridden (`make images IMAGE_TAG=v1.2.3`). They
# are expanded only when an images target runs, so other targets never pay
# for the git and go calls.

IMAGES_DIR ?= dist/images
IMAGE_ARCH ?= $(shell go env GOARCH)
# The install guides export STACKYARD_REGISTRY and STACKYARD_VERSION
# (docs/install.md): when set, they name the images built and pushed too.
IMAGE_REGISTRY ?= $(or $(STACKYARD_REGISTRY),ghcr.io/stackyard)
# The version stamped into stackyard (internal/cli.Version) and recorded as
# org.opencontainers.image.version; -dirty when the work tree has changes.
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_TAG ?= $(or $(STACKYARD_VERSION),$(IMAGE_VERSION))
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_SOURCE ?= https://github.com/stackyard/stackyard
# The images' creation time: SOURCE_DATE_EPOCH when the environment sets it
# (reproducible-builds.org), else the last commit's time, never the clock.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The CA bundle copied into both images: Debian's ca-certificates.
CA_CERTIFICATES ?= /etc/ssl/certs/ca-certificates.crt

IMAGE_STACKYARD = dist/bin/linux_$(IMAGE_ARCH)/stackyard
# The lean agent, built in the same go build so that it is the same build
# as stackyard (the local runtime runs it only then).
IMAGE_STACKYARD_AGENT = dist/bin/linux_$(IMAGE_ARCH)/stackyard-agent
# Static, without paths, build ID or symbol tables, so that the same source
# and Go toolchain give the same bytes.
IMAGE_GO_LDFLAGS = -s -w -buildid= -X github.com/stackyard/stackyard/internal/cli.Version=$(IMAGE_VERSION) \
	-X github.com/stackyard/stackyard/internal/cli.Commit=$(IMAGE_REVISION) \
	-X github.com/stackyard/stackyard/internal/cli.BuildDate=$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)

##@ Images

.PHONY: images
images: $(PULUMI_TOOLS) ca-certificates ## Build the operator and agent images into dist/images (no container engine; see docs/container-images.md).
	@echo ">> building stackyard $(IMAGE_VERSION) for linux/$(IMAGE_ARCH)" >&2
	@mkdir -p $(dir $(IMAGE_STACKYARD))
	@CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -buildvcs=auto -ldflags "$(IMAGE_GO_LDFLAGS)" \
		-o $(dir $(IMAGE_STACKYARD)) ./cmd/stackyard ./cmd/stackyard-agent
	@echo ">> assembling the images in $(IMAGES_DIR) (created $(SOURCE_DATE_EPOCH))" >&2
	@go run ./hack/image -out $(IMAGES_DIR) -arch $(IMAGE_ARCH) \
		-stackyard $(IMAGE_STACKYARD) -stackyard-agent $(IMAGE_STACKYARD_AGENT) -pulumi $(PULUMI) -pulumi-language-yaml $(PULUMI_YAML) \
		-ca-certificates $(CA_CERTIFICATES) \
		-operator-ref $(IMAGE_REGISTRY)/stackyard:$(IMAGE_TAG) \
		-agent-ref $(IMAGE_REGISTRY)/stackyard-agent:$(IMAGE_TAG) \
		-version $(IMAGE_VERSION) -revision $(IMAGE_REVISION) -source $(IMAGE_SOURCE) \
		-pulumi-version $(PULUMI_VERSION) -created $(SOURCE_DATE_EPOCH)

# PUSH_FLAGS go to hack/push: -insecure for a registry over plain HTTP.
PUSH_FLAGS ?=

.PHONY: push
push: ## Push the images `make images` built to $(IMAGE_REGISTRY) as :$(IMAGE_TAG), digests unchanged (docker config credentials).
	@go run ./hack/push $(PUSH_FLAGS) \
		$(IMAGES_DIR)/stackyard-operator.oci=$(IMAGE_REGISTRY)/stackyard:$(IMAGE_TAG) \
		$(IMAGES_DIR)/stackyard-agent.oci=$(IMAGE_REGISTRY)/stackyard-agent:$(IMAGE_TAG)

.PHONY: ca-certificates
ca-certificates: ## Install Debian's ca-certificates when the CA bundle for the images is missing.
	@test -s $(CA_CERTIFICATES) || { echo ">> installing Debian's ca-certificates" >&2; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates >&2; }
	@test -s $(CA_CERTIFICATES) || { echo "no CA bundle at $(CA_CERTIFICATES)" >&2; exit 1; }
