package image

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyELF writes a minimal 64-bit little-endian ELF executable header for
// machine, with one program header: PT_INTERP when dynamic, else PT_LOAD.
func tinyELF(t *testing.T, machine elf.Machine, dynamic bool) string {
	t.Helper()
	var buf bytes.Buffer
	hdr := elf.Header64{
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Phoff:     64,
		Ehsize:    64,
		Phentsize: 56,
		Phnum:     1,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	prog := elf.Prog64{Type: uint32(elf.PT_LOAD)}
	if dynamic {
		prog.Type = uint32(elf.PT_INTERP)
	}
	for _, v := range []any{hdr, prog} {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(p, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckExecutable(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path, arch, want string
	}{
		"static amd64": {tinyELF(t, elf.EM_X86_64, false), "amd64", ""},
		"static arm64": {tinyELF(t, elf.EM_AARCH64, false), "arm64", ""},
		"wrong arch":   {tinyELF(t, elf.EM_X86_64, false), "arm64", "not arm64"},
		"dynamic":      {tinyELF(t, elf.EM_X86_64, true), "amd64", "dynamically linked"},
		"not ELF":      {notELF, "amd64", "not an ELF executable"},
		"unknown arch": {tinyELF(t, elf.EM_X86_64, false), "wasm", "unsupported architecture"},
		"missing":      {filepath.Join(t.TempDir(), "missing"), "amd64", "not an ELF executable"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckExecutable(tc.path, tc.arch)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
