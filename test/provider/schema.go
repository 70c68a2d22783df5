// Package provider is stackyardtest, a Pulumi resource provider that exists
// only so stackyard's tests can drive the real Pulumi engine end to end.
//
// It speaks the real gRPC provider protocol (pulumirpc.ResourceProvider) and
// offers four small resources whose effects a test can observe or provoke:
//
//   - File writes a file on the local disk and reads it back on refresh, so
//     editing the file by hand is drift.
//   - Random generates a string once and keeps it until an input changes;
//     it also returns a secret output.
//   - Sleep waits on Create and Update, and stops early when cancelled or
//     when the resource's customTimeouts passes.
//   - Fail makes Create and Update fail with a chosen message.
//
// With JournalEnv set, every write the provider makes is appended to a
// file, so a test can count how often a change reached a resource.
//
// The binary pulumi-resource-stackyardtest (see cmd/) runs Main; make tools
// puts it in bin/, where the engine finds it on PATH.
package provider

import (
	_ "embed"
)

// Name is the Pulumi package name of this provider: the first part of every
// resource token, and the suffix of the plugin binary's name.
const Name = "stackyardtest"

// Version is the plugin version reported by GetPluginInfo; it must match the
// version in schema.json so the engine and the YAML host agree on the package.
const Version = "0.1.0"

// Resource type tokens, as written in a program's `type:` field.
const (
	// FileType is the token of the File resource (a file on local disk).
	FileType = Name + ":index:File"
	// RandomType is the token of the Random resource (a stable random string).
	RandomType = Name + ":index:Random"
	// SleepType is the token of the Sleep resource (a cancellable wait).
	SleepType = Name + ":index:Sleep"
	// FailType is the token of the Fail resource (a deliberate failure).
	FailType = Name + ":index:Fail"
)

//go:embed schema.json
var schemaJSON string

// Schema returns the package schema served by GetSchema. Pulumi YAML uses it
// to type-check programs, so it lists every resource with its inputs and
// outputs; it is kept as a JSON file so it reads like any provider's schema.
func Schema() string {
	return schemaJSON
}
