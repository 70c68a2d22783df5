package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLean: the lean agent imports none of the operator's heavy packages.
// Their package initialisation (client-go's scheme registers every API
// group; controller-runtime's) runs at every agent start whether used or
// not, and it is what this binary exists to leave out. No client-go
// package at all: its --auth kubernetes speaks HTTPS itself
// (internal/agent/auth/apireviews), and client-go's rest and clientcmd
// would bring much of the rest back.
func TestLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !slices.Contains(deps, "github.com/stackyard/stackyard/internal/agent/server") {
		t.Fatalf("go list -deps gave %d packages, without the agent's server: not this binary's list", len(deps))
	}
	for _, heavy := range []string{
		"k8s.io/client-go",
		"sigs.k8s.io/controller-runtime",
		"github.com/stackyard/stackyard/internal/cli",
		"github.com/stackyard/stackyard/internal/operator",
	} {
		for _, d := range deps {
			if d == heavy || strings.HasPrefix(d, heavy+"/") {
				t.Errorf("stackyard-agent imports %s (through %s)", heavy, d)
				break
			}
		}
	}
}
