// Command mkimage writes a one-layer container image as a docker-archive
// tarball (the format of `docker save`, which `ctr images import` reads),
// with the standard library only. The test cluster uses it for its sandbox
// image and its smoke-test image, built from static Go binaries.
//
//	mkimage -out hello.tar -ref stackyard.test/hello:1 -file bin/hello:/hello -entrypoint /hello
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var files fileList
	out := flag.String("out", "", "output tarball")
	ref := flag.String("ref", "", "image reference (name:tag) recorded in the archive")
	entrypoint := flag.String("entrypoint", "", "entrypoint, space-separated")
	arch := flag.String("arch", runtime.GOARCH, "image architecture")
	flag.Var(&files, "file", "SRC:DEST, a file to put in the layer (repeatable); mode 0755")
	flag.Parse()
	if *out == "" || *ref == "" || len(files) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, *ref, *entrypoint, *arch, files); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// epoch keeps the archive reproducible: the same binaries give the same image.
var epoch = time.Unix(0, 0).UTC()

func run(out, ref, entrypoint, arch string, files []string) error {
	layer, err := buildLayer(files)
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	config := map[string]any{
		"architecture": arch,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": strings.Fields(entrypoint),
			"Env":        []string{"PATH=/"},
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])},
		},
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{ref},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, configJSON}, {layerName, layer}, {"manifest.json", manifest}} {
		if dir := path.Dir(e.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if err := writeFile(tw, e.name, e.data, 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// buildLayer returns an uncompressed layer tar holding each SRC at DEST.
func buildLayer(files []string) ([]byte, error) {
	type entry struct{ src, dest string }
	var entries []entry
	dirs := map[string]bool{}
	for _, f := range files {
		src, dest, ok := strings.Cut(f, ":")
		if !ok || !strings.HasPrefix(dest, "/") {
			return nil, fmt.Errorf("-file %q: want SRC:/DEST", f)
		}
		dest = strings.TrimPrefix(path.Clean(dest), "/")
		for d := path.Dir(dest); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		entries = append(entries, entry{src, dest})
	}
	sortedDirs := make([]string, 0, len(dirs))
	for d := range dirs {
		sortedDirs = append(sortedDirs, d)
	}
	sort.Strings(sortedDirs)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range sortedDirs {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		if err := writeFile(tw, e.dest, data, 0o755); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
