# End-to-end benchmarks (test/bench): what stackyard adds to running Pulumi
# by hand — update latency, burst throughput, idle cost — measured on the
# real components (envtest control plane, git server, Pulumi CLI, the
# operator as its own process). They write docs/benchmarks.md and are never
# part of `make test`: the suite sits behind the "bench" build tag.
#
# Knobs: BENCH_N (burst sizes), BENCH_REPEAT (latency repetitions),
# BENCH_BURST_ROUNDS (runs of a burst of 10 or fewer, whose medians count),
# BENCH_BURST_ROUNDS_100 (runs of a burst of 11 to 100, likewise),
# BENCH_SCALE_N and BENCH_SHARDS (make bench-scale: Stacks and shard counts),
# BENCH_SHARD_BURST_N (make bench-shard-burst: the burst under those shards),
# BENCH_CONFIG_BURST_N and BENCH_CONFIG_FLOOR_N (make bench-config-burst:
# config changes at once, and how many of them the floor makes by hand),
# BENCH_FLEET_N (make bench-fleet: the Stacks a stage rolls a release out to),
# BENCH_RUN (a subset of the figures, e.g. latency or 'burst-100|idle');
# BENCH_IDLE_AFTER, BENCH_IDLE_FOR and BENCH_OPERATOR_ARGS (further operator
# flags, e.g. --pprof-bind-address=127.0.0.1:6060) are read from the
# environment.

BENCH_N ?= 10 100
BENCH_REPEAT ?= 10
BENCH_BURST_ROUNDS ?= 5
BENCH_BURST_ROUNDS_100 ?= 3
BENCH_RUN ?=
BENCH_SCALE_N ?= 10000
BENCH_SHARDS ?= 1 2 4
BENCH_SHARD_BURST_N ?= 1000
BENCH_CONFIG_BURST_N ?= 10000
BENCH_CONFIG_FLOOR_N ?= 1000
BENCH_FLEET_N ?= 200

.PHONY: bench-e2e
bench-e2e: tools ## Measure latency, burst and idle cost end to end; writes docs/benchmarks.md (~11 min on 2 cores).
	BENCH_N="$(BENCH_N)" BENCH_REPEAT="$(BENCH_REPEAT)" BENCH_BURST_ROUNDS="$(BENCH_BURST_ROUNDS)" BENCH_BURST_ROUNDS_100="$(BENCH_BURST_ROUNDS_100)" BENCH_RUN="$(BENCH_RUN)" go test -tags bench -count=1 -timeout 120m -v \
		-run '^TestBench$$$(if $(BENCH_RUN),/^($(BENCH_RUN))$$)' ./test/bench/

.PHONY: bench-fleet
bench-fleet: tools ## Roll a release out to BENCH_FLEET_N Stacks of one stage in 4 waves, and by hand; writes figure 8 of docs/benchmarks.md.
	BENCH_FLEET_N="$(BENCH_FLEET_N)" go test -tags bench -count=1 -timeout 120m -v \
		-run '^TestBenchFleet$$' ./test/bench/

.PHONY: bench-shard-burst
bench-shard-burst: tools ## Measure a burst of new Stacks under 1, 2 and 4 shards; adds it to figure 7 (~35 min on 2 cores at 1,000).
	BENCH_SHARD_BURST_N="$(BENCH_SHARD_BURST_N)" BENCH_SHARDS="$(BENCH_SHARDS)" go test -tags bench -count=1 -timeout 120m -v \
		-run '^TestBenchShardBurst$$' ./test/bench/

.PHONY: bench-config-burst
bench-config-burst: tools ## Change the config of BENCH_CONFIG_BURST_N Stacks at once on an operator holding BENCH_SCALE_N; adds it to figure 7 (~2 h on 2 cores at 10,000).
	BENCH_SCALE_N="$(BENCH_SCALE_N)" BENCH_CONFIG_BURST_N="$(BENCH_CONFIG_BURST_N)" BENCH_CONFIG_FLOOR_N="$(BENCH_CONFIG_FLOOR_N)" \
		go test -tags bench -count=1 -timeout 180m -v \
		-run '^TestBenchConfigBurst$$' ./test/bench/

.PHONY: bench-scale
bench-scale: tools ## Measure N deployed Stacks under 1, 2 and 4 shards (restart, idle); writes figure 7 of docs/benchmarks.md (~25 min on 2 cores at 10,000).
	BENCH_SCALE_N="$(BENCH_SCALE_N)" BENCH_SHARDS="$(BENCH_SHARDS)" go test -tags bench -count=1 -timeout 120m -v \
		-run '^TestBenchScale$$' ./test/bench/
