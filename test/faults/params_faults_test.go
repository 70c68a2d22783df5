//go:build faults

package faults

// defaults are the counts `make test-faults` runs with (the "faults" build
// tag), the ones docs/reliability.md reports.
var defaults = params{
	OperatorKills:        20,
	Stacks:               3,
	AgentKills:           10,
	GitOutages:           5,
	DiskFills:            6,
	APIServerRestarts:    4,
	PromotionLeaderKills: 5,
	StubbornHang:         true,
}
