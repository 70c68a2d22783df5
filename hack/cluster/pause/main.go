// Command pause is the test cluster's pod sandbox ("pause") process: it holds
// the pod's namespaces, reaps orphaned children and exits on SIGINT/SIGTERM.
// The cluster cannot pull registry.k8s.io/pause, so hack/cluster/up.sh builds
// this and imports it as the sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
