// Command embed-schema writes the two files the Kubernetes provider's main
// package embeds, from the sources its module ships:
//
//	embed-schema SRC_DIR OUT_DIR VERSION
//
// reads SRC_DIR/schema.json and SRC_DIR/terraform-mapping.json, and writes
// OUT_DIR/schema-embed.json (the schema with its version set to VERSION)
// and OUT_DIR/terraform-mapping-embed.json, both compacted.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: embed-schema SRC_DIR OUT_DIR VERSION")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "embed-schema:", err)
		os.Exit(1)
	}
}

func run(src, out, version string) error {
	data, err := os.ReadFile(filepath.Join(src, "schema.json"))
	if err != nil {
		return err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("schema.json: %w", err)
	}
	if spec["version"], err = json.Marshal(version); err != nil {
		return err
	}
	if data, err = json.Marshal(spec); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "schema-embed.json"), data, 0o644); err != nil {
		return err
	}

	data, err = os.ReadFile(filepath.Join(src, "terraform-mapping.json"))
	if err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return fmt.Errorf("terraform-mapping.json: %w", err)
	}
	return os.WriteFile(filepath.Join(out, "terraform-mapping-embed.json"), compact.Bytes(), 0o644)
}
