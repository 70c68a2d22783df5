package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// OperatorOptions says how StartOperator runs `stackyard operator`.
type OperatorOptions struct {
	// Bin is the stackyard binary, from BuildStackyard.
	Bin string
	// Dir receives the kubeconfig and the log, and the state directory
	// unless StateDir is set.
	Dir string
	// Config is how the operator reaches the API server: an Env's Config
	// (a cluster administrator), or one from ServiceAccountConfig, whose
	// impersonation the kubeconfig carries.
	Config *rest.Config
	// StateDir is the operator's --state-dir; empty means Dir/operator.
	StateDir string
	// Args are further flags, after the ones StartOperator always passes
	// (local runtime, tool directories, loopback addresses).
	Args []string
	// Env is added to the process's environment (KEY=VALUE), after this
	// process's own and KUBECONFIG.
	Env []string
}

// Operator is `stackyard operator --runtime local` running as a process of
// its own against a test control plane, so that a test can measure it from
// /proc, kill it with a signal as a node failure would, and start it again
// on the same state directory, metrics address and log.
type Operator struct {
	// Args are the operator's arguments after the binary's path.
	Args []string
	// StateDir is the operator's --state-dir.
	StateDir string
	// LogPath is the file the operator's stdout and stderr go to; every
	// start appends to it.
	LogPath string
	// MetricsURL is the operator's Prometheus endpoint.
	MetricsURL string

	bin string
	env []string

	mu sync.Mutex
	// slowStops are the goroutines that made stops slow (SlowStops).
	slowStops []string
	cmd       *exec.Cmd
	done      chan struct{} // closed when cmd has been waited for
	log       *os.File
}

// StartOperator writes a kubeconfig for opts.Config, starts the operator
// and waits until it serves metrics (the manager runs). The process is
// stopped when the test ends, and its log's tail is logged if the test
// failed.
func StartOperator(t testing.TB, opts OperatorOptions) *Operator {
	t.Helper()
	o, err := newOperator(opts, FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Stop(); err != nil {
			t.Logf("stopping the operator: %v", err)
		}
		if t.Failed() {
			t.Logf("operator log (tail):\n%s", o.LogTail(60))
		}
	})
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	return o
}

// newOperator prepares an Operator from opts, serving metrics on
// metricsAddr, without starting it.
func newOperator(opts OperatorOptions, metricsAddr string) (*Operator, error) {
	if opts.Bin == "" || opts.Dir == "" || opts.Config == nil {
		return nil, errors.New("testenv: OperatorOptions needs Bin, Dir and Config")
	}
	kubeconfig := filepath.Join(opts.Dir, "kubeconfig")
	if err := WriteKubeconfig(opts.Config, kubeconfig); err != nil {
		return nil, err
	}
	stateDir := opts.StateDir
	if stateDir == "" {
		stateDir = filepath.Join(opts.Dir, "operator")
	}
	args := []string{"operator", "--runtime", "local",
		"--state-dir", stateDir,
		"--tool-dirs", BinDir(),
		"--artifact-listen", "127.0.0.1:0",
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", "0",
	}
	return &Operator{
		Args:       append(args, opts.Args...),
		StateDir:   stateDir,
		LogPath:    filepath.Join(opts.Dir, "operator.log"),
		MetricsURL: "http://" + metricsAddr + "/metrics",
		bin:        opts.Bin,
		env:        append(append(os.Environ(), "KUBECONFIG="+kubeconfig), opts.Env...),
	}, nil
}

// operatorStartTimeout bounds how long Start waits for the metrics
// endpoint.
const operatorStartTimeout = time.Minute

// Start starts the operator process, which must not be running, and waits
// until it serves metrics. Its output is appended to LogPath.
func (o *Operator) Start() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil {
		return errors.New("testenv: the operator is already running")
	}
	log, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(o.bin, o.Args...)
	cmd.Env = o.env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting the operator: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	o.cmd, o.done, o.log = cmd, done, log

	deadline := time.Now().Add(operatorStartTimeout)
	for {
		if _, err := o.Metric("rest_client_requests_total"); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("the operator exited while starting:\n%s", o.LogTail(40))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the operator did not serve metrics within %s:\n%s", operatorStartTimeout, o.LogTail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Pid is the running operator's process id, 0 when it is not running.
func (o *Operator) Pid() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return 0
	}
	return o.cmd.Process.Pid
}

// Running reports whether the operator process started last is still
// running (it has not exited on its own or been stopped).
func (o *Operator) Running() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return false
	}
	select {
	case <-o.done:
		return false
	default:
		return true
	}
}

// Kill ends the operator with SIGKILL, as a node failure or the OOM
// killer would, and waits for it to be gone. Nothing it runs gets a chance
// to clean up; its agents die with it (they have a parent-death signal).
// Killing an operator that is not running does nothing.
func (o *Operator) Kill() error {
	return o.end(syscall.SIGKILL, 0)
}

// operatorStopGrace is how long Stop waits after SIGTERM before SIGKILL.
const operatorStopGrace = 30 * time.Second

// Stop asks the operator to stop (SIGTERM) and waits for it, killing it
// if it has not stopped within 30 seconds. Stopping an operator that is
// not running does nothing.
func (o *Operator) Stop() error {
	return o.end(syscall.SIGTERM, operatorStopGrace)
}

// end sends sig and waits up to grace for the process to exit before
// SIGKILL.
func (o *Operator) end(sig syscall.Signal, grace time.Duration) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return nil
	}
	defer func() {
		_ = o.log.Close()
		o.cmd, o.done, o.log = nil, nil, nil
	}()
	if err := o.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	from := fileSize(o.LogPath)
	select {
	case <-o.done:
		if log := readFrom(o.LogPath, from); strings.Contains(log, slowShutdownMessage) {
			o.slowStops = append(o.slowStops, StuckGoroutines(log[strings.Index(log, slowShutdownMessage):]))
		}
		return nil
	case <-time.After(grace):
	}
	if sig == syscall.SIGKILL {
		_ = o.cmd.Process.Kill()
		<-o.done
		return nil
	}
	// The Go runtime answers SIGQUIT with every goroutine's stack on
	// stderr, the log: what the stop waits for is named there.
	from = fileSize(o.LogPath)
	_ = o.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-o.done:
	case <-time.After(5 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
	return fmt.Errorf("the operator did not stop within %s of %v and was killed; the goroutines it waited on:\n%s",
		grace, sig, StuckGoroutines(readFrom(o.LogPath, from)))
}

// slowShutdownMessage is what the operator logs when a stop takes long,
// before the stacks of its goroutines (internal/operator's
// SlowShutdownMessage).
const slowShutdownMessage = "the operator is still stopping"

// SlowStops returns, for each stop so far that took the operator long
// enough to report what it waited on (it then ends the stop on its own,
// at its shutdown timeout), the goroutines it named. A suite logs them:
// such a stop is not a failure of what the suite tests.
func (o *Operator) SlowStops() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.slowStops...)
}

// fileSize is the size of the file at path, 0 if it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the file at path from offset on.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err.Error()
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// stuckFrames is how many calls of each goroutine StuckGoroutines keeps.
const stuckFrames = 6

// StuckGoroutines shortens a Go goroutine dump (SIGQUIT's, or a goroutine
// profile's with debug=1) to what a failure message can carry: each
// goroutine blocked in the operator's code, controller-runtime or
// client-go, with its state and innermost calls, and the same stacks
// counted once.
func StuckGoroutines(dump string) string {
	seen := map[string]int{}
	var order []string
	add := func(key string, n int) {
		if seen[key] == 0 {
			order = append(order, key)
		}
		seen[key] += n
	}
	for _, block := range strings.Split(dump, "\n\n") {
		lines := stackStart(strings.Split(strings.TrimSpace(block), "\n"))
		if len(lines) < 2 || !ours(block) {
			continue
		}
		if n, frames, ok := profileBlock(lines); ok {
			add(strings.Join(frames, " < "), n)
			continue
		}
		state := lines[0]
		if i := strings.Index(state, "["); i >= 0 {
			state = strings.TrimSuffix(state[i:], ":")
		}
		var frames []string
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "created by") && len(frames) < stuckFrames {
				if i := strings.LastIndex(l, "("); i > 0 {
					l = l[:i]
				}
				frames = append(frames, l)
			}
		}
		add(state+" "+strings.Join(frames, " < "), 1)
	}
	if len(order) == 0 {
		return "(no goroutine dump in the log)"
	}
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "  %dx %s\n", seen[k], k)
	}
	return b.String()
}

// stackStart drops the lines before a goroutine's stack: a log line, the
// profile's header.
func stackStart(lines []string) []string {
	for i, l := range lines {
		if strings.Contains(l, " @ 0x") || (strings.HasPrefix(l, "goroutine ") && strings.Contains(l, " [")) {
			return lines[i:]
		}
	}
	return nil
}

// ours reports whether a goroutine's stack runs the operator's code,
// controller-runtime's or client-go's.
func ours(stack string) bool {
	return strings.Contains(stack, "stackyard/") || strings.Contains(stack, "controller-runtime") || strings.Contains(stack, "client-go")
}

// profileBlock reads one stack of a goroutine profile written with
// debug=1 ("N @ pcs", then "#\tpc\tfunc+off\tfile:line" lines): how many
// goroutines share it, and its innermost calls.
func profileBlock(lines []string) (n int, frames []string, ok bool) {
	count, _, found := strings.Cut(lines[0], " @ ")
	if !found {
		return 0, nil, false
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return 0, nil, false
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) < 3 || f[0] != "#" || len(frames) == stuckFrames {
			continue
		}
		fn, _, _ := strings.Cut(f[2], "+0x")
		frames = append(frames, fn)
	}
	return n, frames, true
}

// Restart kills the operator with SIGKILL and starts it again.
func (o *Operator) Restart() error {
	if err := o.Kill(); err != nil {
		return err
	}
	return o.Start()
}

// Metric sums the samples of the metric family name (every label set)
// that the operator serves now.
func (o *Operator) Metric(name string) (float64, error) { return o.MetricWith(name, "") }

// MetricWith sums the samples of the metric family name whose labels
// contain label, such as `controller="stack"` ("" for every sample).
func (o *Operator) MetricWith(name, label string) (float64, error) {
	resp, err := http.Get(o.MetricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", o.MetricsURL, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if label != "" && !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

// LogTail returns the last n lines of the operator's log.
func (o *Operator) LogTail(n int) string { return TailFile(o.LogPath, n) }

// WriteKubeconfig writes a kubeconfig that reaches the API server as cfg
// does: its server, CA, client certificate or token, and impersonation
// (ServiceAccountConfig's), for a process started by a test.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// TailFile returns the last n lines of the file at path, or the error
// reading it.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
