package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// PositiveIntEnv reads a positive integer knob of a long suite (benchmarks,
// fault injection) from the environment variable name, def when it is
// unset, and fails the test naming the variable when it is not a positive
// integer.
func PositiveIntEnv(t testing.TB, name string, def int) int {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
