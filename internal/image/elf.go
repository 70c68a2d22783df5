package image

import (
	"debug/elf"
	"fmt"
)

// elfMachines maps the architectures images are built for, as GOARCH
// spells them, to the ELF machine their executables declare.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// CheckExecutable fails unless path is a statically linked Linux ELF
// executable for goarch: the images have no libc and no dynamic loader,
// so anything else could not run in them.
func CheckExecutable(path, goarch string) error {
	want, ok := elfMachines[goarch]
	if !ok {
		return fmt.Errorf("%s: unsupported architecture %q", path, goarch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s: built for %s, not %s (%s)", path, f.Machine, goarch, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (it needs an interpreter); build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
