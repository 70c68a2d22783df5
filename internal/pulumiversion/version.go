// Package pulumiversion says which Pulumi CLI versions stackyard works with:
// the one it is built and tested with (Pinned, generated from the Makefile's
// PULUMI_VERSION), and the range of workspace images the agent accepts.
package pulumiversion

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// Minimum is the oldest Pulumi CLI the agent works with: every setup runs
// `pulumi install`, which appeared in v3.91.0.
const Minimum = "3.91.0"

// Unsupported is the first version the agent refuses: the Automation API it
// is built on drives the CLI of Pulumi 3, and a new major version is free to
// change the commands and output it reads.
const Unsupported = "4.0.0"

var (
	minimum     = version.MustParseGeneric(Minimum)
	unsupported = version.MustParseGeneric(Unsupported)
)

// Range says whether the agent can drive the CLI of version v: -1 when v is
// older than Minimum, +1 when it is Unsupported or newer, 0 when it is in
// range or does not parse (a development build: the calls that need newer
// features say so themselves).
func Range(v string) int {
	got, err := version.ParseGeneric(v)
	switch {
	case err != nil:
		return 0
	case !got.AtLeast(minimum):
		return -1
	case got.AtLeast(unsupported):
		return 1
	}
	return 0
}

// Supported describes the range for messages: "3.91.0 up to, not including,
// 4.0.0 (tested with 3.274.1)".
func Supported() string {
	return fmt.Sprintf("%s up to, not including, %s (tested with %s)", Minimum, Unsupported, Pinned)
}
