# Go benchmarks (testing.B) of the hot paths of a reconcile, measured with
# no network and no control plane: rendering the Workspace and the Update
# from a Stack, building and sending the status patch, and ingesting a
# finished Update (outputs, redaction, history) into status.
# docs/go-benchmarks.md says what each measures and holds this machine's
# numbers.
#
# `make bench-go` writes $(GOBENCH_OUT)/new.txt, keeping the previous run
# as old.txt, and prints benchstat's comparison of the two: run it, change
# the code, run it again. benchstat is built from tools/perf into bin/ on
# first use; it is not in TOOLS, so `make test` never builds it.
#
# Knobs: GOBENCH (a -bench regexp), GOBENCH_COUNT (runs of each benchmark;
# benchstat wants 6 or more for a comparison), GOBENCH_TIME (-benchtime).

BENCHSTAT := $(BIN)/benchstat

GOBENCH_PKGS := ./internal/controller/stack/ ./internal/controller/update/ ./internal/reconcile/
GOBENCH ?= .
GOBENCH_COUNT ?= 6
GOBENCH_TIME ?= 500ms
GOBENCH_OUT ?= $(CURDIR)/.stackyard/bench-go

$(BENCHSTAT): tools/perf/go.mod tools/perf/go.sum
	@$(BUILD_TOOL) tools/perf $@ golang.org/x/perf/cmd/benchstat

##@ Benchmarks

.PHONY: bench-go
bench-go: $(BENCHSTAT) ## Run the Go benchmarks of the reconcile hot paths and compare with the last run (~1 min).
	@mkdir -p $(GOBENCH_OUT)
	@if [ -f $(GOBENCH_OUT)/new.txt ]; then mv -f $(GOBENCH_OUT)/new.txt $(GOBENCH_OUT)/old.txt; fi
	go test -run '^$$' -bench '$(GOBENCH)' -benchtime=$(GOBENCH_TIME) -count=$(GOBENCH_COUNT) $(GOBENCH_PKGS) \
		| tee $(GOBENCH_OUT)/new.txt.tmp
	@mv -f $(GOBENCH_OUT)/new.txt.tmp $(GOBENCH_OUT)/new.txt
	@echo ">> results in $(GOBENCH_OUT)/new.txt" >&2
	@if [ -f $(GOBENCH_OUT)/old.txt ]; then \
		$(BENCHSTAT) old=$(GOBENCH_OUT)/old.txt new=$(GOBENCH_OUT)/new.txt; \
	else \
		$(BENCHSTAT) $(GOBENCH_OUT)/new.txt; \
	fi
