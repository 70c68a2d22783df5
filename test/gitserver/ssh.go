package gitserver

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves a Server's repositories over SSH on loopback, running the
// real git-upload-pack for each clone or fetch. Clients authenticate with a
// public key from the authorized set.
type SSHServer struct {
	// Addr is the listening address, "127.0.0.1:port".
	Addr string
	// HostKey is the server's host public key, for known_hosts checks.
	HostKey ssh.PublicKey

	root       string
	authorized []ssh.PublicKey
	listener   net.Listener
	mu         sync.Mutex
	conns      []net.Conn
	wg         sync.WaitGroup
}

// StartSSH starts an SSH front end for s that accepts the given client keys
// and stops it when the test ends.
func (s *Server) StartSSH(authorized ...ssh.PublicKey) *SSHServer {
	s.t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		s.t.Fatalf("gitserver: host key: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		s.t.Fatalf("gitserver: host key: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.t.Fatalf("gitserver: listen: %v", err)
	}
	ss := &SSHServer{
		Addr:       l.Addr().String(),
		HostKey:    signer.PublicKey(),
		root:       s.Root,
		authorized: authorized,
		listener:   l,
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: ss.checkKey}
	cfg.AddHostKey(signer)
	ss.wg.Add(1)
	go ss.serve(cfg)
	s.t.Cleanup(ss.close)
	return ss
}

// RepoURL returns the SSH clone URL of the named repository.
func (ss *SSHServer) RepoURL(name string) string {
	return "ssh://git@" + ss.Addr + "/" + name + ".git"
}

// KnownHosts returns a known_hosts line that trusts this server's host key.
func (ss *SSHServer) KnownHosts() string {
	return knownhosts.Line([]string{knownhosts.Normalize(ss.Addr)}, ss.HostKey) + "\n"
}

// checkKey admits a client whose public key is in the authorized set.
func (ss *SSHServer) checkKey(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	for _, k := range ss.authorized {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return nil, nil
		}
	}
	return nil, errors.New("unknown public key")
}

// serve accepts connections until the listener is closed.
func (ss *SSHServer) serve(cfg *ssh.ServerConfig) {
	defer ss.wg.Done()
	for {
		c, err := ss.listener.Accept()
		if err != nil {
			return
		}
		ss.mu.Lock()
		ss.conns = append(ss.conns, c)
		ss.mu.Unlock()
		ss.wg.Add(1)
		go func() {
			defer ss.wg.Done()
			ss.handleConn(c, cfg)
		}()
	}
}

// handleConn runs the SSH handshake and serves each session channel.
func (ss *SSHServer) handleConn(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer func() { _ = sc.Close() }()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions are served")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go ss.handleSession(ch, chReqs)
	}
}

// handleSession waits for an exec request naming git-upload-pack and runs it
// with the channel as its standard streams, then reports its exit status.
func (ss *SSHServer) handleSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			// Clients send "env" requests first; declining them is allowed.
			_ = req.Reply(false, nil)
			continue
		}
		dir, err := ss.repoDir(req.Payload)
		if err != nil {
			_ = req.Reply(false, nil)
			fmt.Fprintf(ch.Stderr(), "gitserver: %v\n", err)
			return
		}
		_ = req.Reply(true, nil)
		code := runUploadPack(dir, ch)
		status := make([]byte, 4)
		binary.BigEndian.PutUint32(status, uint32(code)) //nolint:gosec // exit codes fit
		_, _ = ch.SendRequest("exit-status", false, status)
		return
	}
}

// repoDir parses an exec payload such as "git-upload-pack '/app.git'" and
// returns the repository directory, refusing anything but upload-pack and
// paths outside the server root.
func (ss *SSHServer) repoDir(payload []byte) (string, error) {
	if len(payload) < 4 {
		return "", errors.New("malformed exec request")
	}
	n := binary.BigEndian.Uint32(payload)
	if int(n) != len(payload)-4 {
		return "", errors.New("malformed exec request")
	}
	verb, arg, _ := strings.Cut(string(payload[4:]), " ")
	if verb != "git-upload-pack" {
		return "", fmt.Errorf("command %q is not served", verb)
	}
	arg = strings.Trim(arg, "'\"")
	clean := path.Clean("/" + arg)
	return filepath.Join(ss.root, filepath.FromSlash(clean)), nil
}

// runUploadPack serves one fetch with the real git-upload-pack. Standard
// input is copied by hand so that a client keeping its side open cannot
// stall the wait for the process.
func runUploadPack(dir string, ch ssh.Channel) int {
	cmd := exec.Command("git", "upload-pack", dir)
	cmd.Env = gitEnv()
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	if err := cmd.Start(); err != nil {
		return 1
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		_ = stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

// close stops accepting, drops open connections and waits for handlers.
func (ss *SSHServer) close() {
	_ = ss.listener.Close()
	ss.mu.Lock()
	for _, c := range ss.conns {
		_ = c.Close()
	}
	ss.mu.Unlock()
	ss.wg.Wait()
}
