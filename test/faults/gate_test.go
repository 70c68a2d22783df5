package faults

import (
	"io"
	"net"
	"sync"
	"testing"
)

// gate is a TCP proxy on loopback in front of a server, which a test can
// close, so that connecting is refused and open connections are cut, as
// when a host goes down, and open again on the same port.
type gate struct {
	target string // the server's host:port
	addr   string // the gate's host:port

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// newGate opens a gate to target on a free loopback port; it is closed
// when the test ends.
func newGate(t *testing.T, target string) *gate {
	t.Helper()
	g := &gate{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(t, err)
	}
	g.addr = ln.Addr().String()
	g.serve(ln)
	t.Cleanup(g.Close)
	return g
}

// Open listens again on the gate's port.
func (g *gate) Open() error {
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		return err
	}
	g.serve(ln)
	return nil
}

// Close stops listening and cuts every open connection. Connecting to a
// closed gate is refused.
func (g *gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		_ = c.Close()
	}
	clear(g.conns)
}

// serve accepts connections on ln and pipes each to the target.
func (g *gate) serve(ln net.Listener) {
	g.mu.Lock()
	g.ln = ln
	g.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go g.pipe(in)
		}
	}()
}

// pipe copies between in and a new connection to the target until either
// side ends or the gate closes.
func (g *gate) pipe(in net.Conn) {
	out, err := net.Dial("tcp", g.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !g.track(in, out) {
		return
	}
	defer g.untrack(in, out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// track records the two ends of a piped connection, or closes them and
// returns false when the gate has closed in the meantime.
func (g *gate) track(conns ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		g.conns[c] = struct{}{}
	}
	return true
}

// untrack closes and forgets the ends of a piped connection.
func (g *gate) untrack(conns ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(g.conns, c)
	}
}
