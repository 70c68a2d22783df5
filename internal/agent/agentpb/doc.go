// Package agentpb holds the Go code generated from
// internal/agent/proto/agent.proto: the messages and the client and server
// stubs of the workspace agent's AutomationService. Regenerate it with
// `make generate-proto`; a test fails when the committed code is stale.
package agentpb
