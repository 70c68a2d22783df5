package stack_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/stackyard/stackyard/test/testenv"
)

// Everything the operator and its agents log during the suite is kept in
// operatorLogs; secret values the tests hand to the operator are
// registered with neverLogged, and the suite fails after its tests if any of
// them was logged.
var (
	operatorLogs = &testenv.SyncBuffer{}
	secretsMu    sync.Mutex
	secretValues []string
)

// neverLogged registers values that must appear in no log line.
func neverLogged(values ...string) {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	secretValues = append(secretValues, values...)
}

// leakedSecrets returns a description of each registered value found in
// the logs.
func leakedSecrets() []string {
	secretsMu.Lock()
	defer secretsMu.Unlock()
	logs := operatorLogs.String()
	var leaks []string
	for _, v := range secretValues {
		if i := strings.Index(logs, v); i >= 0 {
			start := max(0, strings.LastIndex(logs[:i], "\n")+1)
			end := len(logs)
			if j := strings.Index(logs[i:], "\n"); j >= 0 {
				end = i + j
			}
			leaks = append(leaks, fmt.Sprintf("%q in: %s", v, logs[start:end]))
		}
	}
	return leaks
}

// logWriter is where the operator's logger writes: the buffer, and with
// STACKYARD_TEST_LOG set standard error too.
func logWriter() io.Writer {
	if os.Getenv("STACKYARD_TEST_LOG") != "" {
		return io.MultiWriter(operatorLogs, os.Stderr)
	}
	return operatorLogs
}
