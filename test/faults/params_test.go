//go:build !faults

package faults

// defaults are the counts of the default `go test` run: every scenario,
// small enough to take seconds each. `make test-faults` builds with the
// "faults" tag, whose defaults are in params_faults_test.go.
var defaults = params{
	OperatorKills:        2,
	Stacks:               2,
	AgentKills:           1,
	GitOutages:           1,
	DiskFills:            2,
	APIServerRestarts:    1,
	PromotionLeaderKills: 1,
	StubbornHang:         false,
}
