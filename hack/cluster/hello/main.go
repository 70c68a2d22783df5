// Command hello is the test cluster's smoke-test workload: it prints one
// known line (and its arguments) and exits 0, so a test can check that a pod
// from an imported image ran to completion and that its log came back.
//
// Two arguments turn it into a network probe (the image has nothing else):
//
//	hello dial HOST:PORT...   open a TCP connection to each, print "dialed ADDR"
//	hello resolve NAME...     look each name up, print "resolved NAME ADDRS"
//
// Either exits 1 on the first failure, after printing it.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Greeting is the line test/cluster looks for in the pod's log.
const Greeting = "hello from the stackyard test cluster"

func main() {
	fmt.Println(Greeting)
	if len(os.Args) > 1 {
		fmt.Println("args:", strings.Join(os.Args[1:], " "))
	}
	if len(os.Args) < 3 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch os.Args[1] {
	case "dial":
		for _, addr := range os.Args[2:] {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				fmt.Println("dial failed:", err)
				os.Exit(1)
			}
			_ = conn.Close()
			fmt.Println("dialed", addr)
		}
	case "resolve":
		for _, name := range os.Args[2:] {
			addrs, err := net.DefaultResolver.LookupHost(ctx, name)
			if err != nil {
				fmt.Println("resolve failed:", err)
				os.Exit(1)
			}
			fmt.Println("resolved", name, strings.Join(addrs, ","))
		}
	}
}
