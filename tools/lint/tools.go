//go:build tools

// Package tools pins golangci-lint, the linter `make lint` runs, in a
// module of its own so that the main module never carries its
// dependencies.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
