package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessesIn returns the pids of the running processes whose working
// directory is dir, this one left out. The Pulumi CLI runs in the project
// directory and starts its language host and providers there, so this
// counts every process of an operation whatever group or session it is in
// and whoever its parent became. A zombie, which has exited and waits only
// to be reaped, does not count.
func ProcessesIn(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since
		}
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && strings.HasPrefix(string(st[i+1:]), " Z") {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// ProcessesOf returns those of ProcessesIn(dir) that run the executable
// named exe (a base name: "pulumi", "pulumi-resource-stackyardtest").
func ProcessesOf(dir, exe string) []int {
	var out []int
	for _, pid := range ProcessesIn(dir) {
		path, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
		if err == nil && filepath.Base(path) == exe {
			out = append(out, pid)
		}
	}
	return out
}
