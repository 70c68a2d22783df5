// Command hello is the test cluster's smoke-test workload: it prints one
// known line (and its arguments) and exits 0, so a test can check that a pod
// from an imported image ran to completion and that its log came back.
package main

import (
	"fmt"
	"os"
	"strings"
)

// Greeting is the line test/cluster looks for in the pod's log.
const Greeting = "hello from the stackyard test cluster"

func main() {
	fmt.Println(Greeting)
	if len(os.Args) > 1 {
		fmt.Println("args:", strings.Join(os.Args[1:], " "))
	}
}
