# Fault injection (test/faults): the operator killed with SIGKILL in the
# middle of updates, agents killed, programs that hang, the git host and
# the workspaces' disk taken away, all on the real components (envtest's
# kube-apiserver and etcd, the operator as a process of its own, pulumi
# with the test provider, git). Short versions of every scenario run in
# `make test`; this target runs the long ones, behind the "faults" build
# tag, and is what docs/reliability.md reports. Some scenarios mount a
# tmpfs, so it runs as root.
#
# Knobs: FAULTS_N (operator kills, default 20), FAULTS_SEED (replay the
# random choices of a run: every scenario prints its seed), FAULTS_RUN (a
# subset of the scenarios, e.g. 'operator-killed|hang').

FAULTS_N ?= 20
FAULTS_SEED ?=
FAULTS_RUN ?=

.PHONY: test-faults
test-faults: tools ## Inject faults (kills, hangs, git and disk outages) on the real components; see docs/reliability.md (~9 min on 2 cores).
	@$(STACKYARD_BINS)
	STACKYARD_TEST_PREBUILT=$(BIN) FAULTS_N="$(FAULTS_N)" FAULTS_SEED="$(FAULTS_SEED)" go test -tags faults -count=1 -timeout 30m -v \
		-run '^TestFaults$$$(if $(FAULTS_RUN),/^($(FAULTS_RUN))$$)' ./test/faults/...
