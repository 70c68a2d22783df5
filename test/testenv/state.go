package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// PendingOperations reads the state of stack in a file:// backend's
// directory and returns its pending operations as "<urn> <type>" (for
// example "urn:pulumi:dev::p::t:index:T::name creating"): the resource
// operations that were in flight when the state was written.
func PendingOperations(backend, project, stack string) []string {
	b, err := os.ReadFile(filepath.Join(backend, ".pulumi", "stacks", project, stack+".json"))
	if err != nil {
		return nil
	}
	var versioned apitype.VersionedCheckpoint
	var cp apitype.CheckpointV3
	if json.Unmarshal(b, &versioned) != nil || json.Unmarshal(versioned.Checkpoint, &cp) != nil || cp.Latest == nil {
		return nil
	}
	var out []string
	for _, op := range cp.Latest.PendingOperations {
		out = append(out, string(op.Resource.URN)+" "+string(op.Type))
	}
	return out
}
