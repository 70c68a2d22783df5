# Gitea, a real forge for the tests of receivers, commit statuses and
# pull-request previews (test/forge starts it on loopback with SQLite).
#
# Everything comes from the Go module code.gitea.io/gitea, pinned in
# tools/gitea/go.mod:
#
#   bin/gitea          the server, built with cgo for SQLite (TOOL_CGO=1)
#   bin/gitea-static/  its templates and options (locales, licences), which
#                      a build without the generated bindata reads from disk;
#                      the web front end's compiled assets are not needed by
#                      the API, webhooks or git over HTTP the tests use
#
# Both are redone only when the pin changes.

GITEA_MODULE := code.gitea.io/gitea
GITEA := $(BIN)/gitea
GITEA_STATIC := $(BIN)/gitea-static/.version

TOOLS += $(GITEA) $(GITEA_STATIC)

# Recursive ('='), so the go command runs only when Gitea is built.
GITEA_VERSION = $(shell cd tools/gitea && go list -m -f '{{.Version}}' $(GITEA_MODULE))

$(GITEA): tools/gitea/go.mod tools/gitea/go.sum
	@TOOL_CGO=1 $(BUILD_TOOL) tools/gitea $@ $(GITEA_MODULE) -tags 'sqlite sqlite_unlock_notify' \
		-ldflags "-X main.Version=$(GITEA_VERSION:v%=%)"

$(GITEA_STATIC): tools/gitea/go.mod tools/gitea/go.sum
	@echo ">> copying Gitea's templates and options from $(GITEA_MODULE) (module tools/gitea) into $(dir $@)" >&2
	@set -euo pipefail; \
	dir=$$(cd tools/gitea && go list -m -f '{{.Dir}}' $(GITEA_MODULE)); \
	version=$$(cd tools/gitea && go list -m -f '{{.Version}}' $(GITEA_MODULE)); \
	if [ -z "$$dir" ] || [ ! -d "$$dir/templates" ] || [ ! -d "$$dir/options" ]; then \
		echo "no templates or options found in the module cache for $(GITEA_MODULE) ($$dir)" >&2; exit 1; \
	fi; \
	out="$(BIN)/gitea-static"; tmp="$$out.tmp.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	cp -R "$$dir/templates" "$$dir/options" "$$tmp"/; chmod -R u+w "$$tmp"; \
	echo "$(GITEA_MODULE) $$version" > "$$tmp/.version"; \
	rm -rf "$$out"; mv "$$tmp" "$$out"

##@ Gitea

.PHONY: gitea-tools
gitea-tools: $(GITEA) $(GITEA_STATIC) ## Build Gitea, the forge of the tests, into bin/ (part of `make tools`).
