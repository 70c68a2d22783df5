package redact

import (
	"os"
	"slices"
	"strings"
)

// SecretEnvVar names the environment variable through which a runtime tells
// the agent which of its other environment variables hold secret values
// (those read from Secrets): a comma-separated list of names. The agent
// adds their values to its Set, so that a program that prints one does not
// reveal it in a status message, an event or an Update's log tail.
const SecretEnvVar = "STACKYARD_SECRET_ENV"

// EncodeSecretEnv is SecretEnvVar's value for names: sorted, without
// duplicates or empty names.
func EncodeSecretEnv(names []string) string {
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "" || strings.Contains(n, ",") })
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}

// SecretEnvValues returns the values of the environment variables that
// SecretEnvVar names, read with getenv (os.Getenv when nil).
func SecretEnvValues(getenv func(string) string) []string {
	if getenv == nil {
		getenv = os.Getenv
	}
	var values []string
	for _, name := range strings.Split(getenv(SecretEnvVar), ",") {
		if name = strings.TrimSpace(name); name != "" {
			if v := getenv(name); v != "" {
				values = append(values, v)
			}
		}
	}
	return values
}
