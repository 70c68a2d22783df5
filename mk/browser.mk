# Real-browser tests (test/browser): Go tests that serve a page and run a
# Node script which drives Chromium through playwright-core.
#
# Chromium is Debian's (package chromium, /usr/bin/chromium), installed on
# first use; Playwright's own browser download cannot work here and is never
# used. playwright-core is pinned in test/browser/package.json and
# package-lock.json and installed with `npm ci` into test/browser/node_modules,
# again only when either file is newer than the stamp left by the last
# install. Node.js and npm come with the machine.

CHROMIUM := /usr/bin/chromium
BROWSER_DIR := test/browser
# Written after a successful `npm ci` (which empties node_modules first), so a
# failed or interrupted install is redone.
BROWSER_NODE_MODULES := $(BROWSER_DIR)/node_modules/.npm-ci.stamp

TEST_DEPS += chromium $(BROWSER_NODE_MODULES)

$(BROWSER_NODE_MODULES): $(BROWSER_DIR)/package.json $(BROWSER_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: the browser tests need Node.js (>= 20) and npm on PATH" >&2; exit 1; }
	@echo ">> npm ci in $(BROWSER_DIR) (playwright-core)" >&2
	@cd $(BROWSER_DIR) && npm ci --no-audit --no-fund --loglevel=error >&2
	@touch $@

# `make help` lists these targets under Test (no ##@ section here, so flux.mk's
# target, read after this file, stays there too).

.PHONY: chromium
chromium: ## Install Chromium (Debian's chromium) when /usr/bin/chromium is missing.
	@test -x $(CHROMIUM) || { echo ">> installing Debian's chromium" >&2; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2; }

.PHONY: browser-tools
browser-tools: chromium $(BROWSER_NODE_MODULES) ## Install what the browser tests need: Chromium and test/browser/node_modules.
	@:
