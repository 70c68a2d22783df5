package testenv

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"
)

// parkForProfile blocks until release is closed: a goroutine the profile
// must name.
func parkForProfile(release <-chan struct{}, parked chan<- struct{}) {
	close(parked)
	<-release
}

func TestStuckGoroutinesOfAProfile(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	for range 3 {
		p := make(chan struct{})
		go parkForProfile(release, p)
		<-p
	}
	var buf bytes.Buffer
	buf.WriteString(`{"level":"error","msg":"the operator is still stopping; the goroutines it waits on follow"}` + "\n")
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	got := StuckGoroutines(buf.String())
	var line string
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "testenv.parkForProfile") {
			line = l
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(line), "3x ") {
		t.Errorf("StuckGoroutines does not count the 3 parked goroutines in one line; got:\n%s", got)
	}
}

func TestStuckGoroutines(t *testing.T) {
	dump := `SIGQUIT: quit
PC=0x47a3c1 m=0 sigcode=0

goroutine 1 [chan receive, 2 minutes]:
sigs.k8s.io/controller-runtime/pkg/manager.(*controllerManager).Start(0xc000, {0x1, 0x2})
	/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.23.3/pkg/manager/internal.go:460 +0x6f5
main.main()
	/src/cmd/stackyard/main.go:12 +0x25

goroutine 7 [sync.WaitGroup.Wait]:
sync.runtime_SemacquireWaitGroup(0xc0001)
	/usr/local/go/src/runtime/sema.go:110 +0x25
sigs.k8s.io/controller-runtime/pkg/cache/internal.(*Informers).Start(0xc00)
	/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.23.3/pkg/cache/internal/informers.go:247 +0x1a5
created by sigs.k8s.io/controller-runtime/pkg/manager.(*runnableGroup).reconcile.func1 in goroutine 5

goroutine 8 [sync.WaitGroup.Wait]:
sync.runtime_SemacquireWaitGroup(0xc0002)
	/usr/local/go/src/runtime/sema.go:110 +0x25
sigs.k8s.io/controller-runtime/pkg/cache/internal.(*Informers).Start(0xc01)
	/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.23.3/pkg/cache/internal/informers.go:247 +0x1a5

goroutine 9 [IO wait]:
internal/poll.runtime_pollWait(0x7f)
	/usr/local/go/src/runtime/netpoll.go:351 +0x85
`
	got := StuckGoroutines(dump)
	for _, want := range []string{
		"1x [chan receive, 2 minutes] sigs.k8s.io/controller-runtime/pkg/manager.(*controllerManager).Start < main.main",
		"2x [sync.WaitGroup.Wait] sync.runtime_SemacquireWaitGroup < sigs.k8s.io/controller-runtime/pkg/cache/internal.(*Informers).Start",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("StuckGoroutines lacks %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "netpoll") {
		t.Errorf("StuckGoroutines kept a goroutine of the runtime alone:\n%s", got)
	}
	if got := StuckGoroutines("nothing"); !strings.Contains(got, "no goroutine dump") {
		t.Errorf("StuckGoroutines(no dump) = %q", got)
	}
}
