package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// staticELF writes a file that passes for a static amd64 executable: an
// ELF header and one PT_LOAD program header, followed by content.
func staticELF(t *testing.T, dir, name, content string) string {
	t.Helper()
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	for _, v := range []any{hdr, elf.Prog64{Type: uint32(elf.PT_LOAD)}} {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString(content)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("certs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	args := []string{
		"-out", out, "-arch", "amd64", "-ca-certificates", ca, "-created", "1700000000",
		"-stackyard", staticELF(t, dir, "stackyard", "s"),
		"-stackyard-agent", staticELF(t, dir, "stackyard-agent", "a"),
		"-pulumi", staticELF(t, dir, "pulumi", "p"),
		"-pulumi-language-yaml", staticELF(t, dir, "yaml", "y"),
		"-operator-ref", "example.com/op:v1", "-agent-ref", "example.com/agent:v1",
	}
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	digests, err := os.ReadFile(filepath.Join(out, "digests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(digests)), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "example.com/op:v1@sha256:") || !strings.HasPrefix(lines[1], "example.com/agent:v1@sha256:") {
		t.Errorf("digests.txt: %q", digests)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".layers-") {
			t.Errorf("scratch directory %s left behind", e.Name())
		}
	}

	for name, bad := range map[string][]string{
		"created":   {"-created", "yesterday"},
		"ref":       {"-operator-ref", "Not A Ref"},
		"arch":      {"-arch", "arm64"},
		"not ELF":   {"-pulumi", ca},
		"no agent":  {"-stackyard-agent", ""},
		"arguments": {"extra"},
	} {
		if err := run(append(append([]string{}, args...), bad...)); err == nil {
			t.Errorf("%s: run(%q) succeeded", name, bad)
		}
	}
}
