package workspace

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// configItems maps a stack's spec.stacks[i].config to the agent's items.
// A string value travels as a literal, any other JSON value as a
// structured value, valueFrom as a read the agent makes in its own
// environment (so Secret-backed values never pass through the operator).
// An item that sets neither value nor valueFrom, or both, stalls the
// Workspace naming it.
func configItems(field string, items []autov1alpha1.ConfigItem) ([]*agentpb.ConfigItem, error) {
	out := make([]*agentpb.ConfigItem, 0, len(items))
	for j, it := range items {
		item, err := configItem(it)
		if err != nil {
			return nil, sreconcile.NewStalling(autov1alpha1.WorkspaceReasonStackSetupFailed,
				fmt.Errorf("%s.config[%d] key %q: %w", field, j, it.Key, err))
		}
		out = append(out, item)
	}
	return out, nil
}

// configItem maps one item.
func configItem(it autov1alpha1.ConfigItem) (*agentpb.ConfigItem, error) {
	item := &agentpb.ConfigItem{Key: it.Key, Path: it.Path != nil && *it.Path, Secret: it.Secret != nil && *it.Secret}
	switch {
	case it.Value != nil && it.ValueFrom != nil:
		return nil, fmt.Errorf("set value or valueFrom, not both")
	case it.Value != nil:
		var v any
		if err := json.Unmarshal(it.Value.Raw, &v); err != nil {
			return nil, fmt.Errorf("value is not JSON: %w", err)
		}
		if s, ok := v.(string); ok {
			item.V = &agentpb.ConfigItem_Literal{Literal: s}
			return item, nil
		}
		pv, err := structpb.NewValue(v)
		if err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
		item.V = &agentpb.ConfigItem_Value{Value: pv}
	case it.ValueFrom != nil:
		from := &agentpb.ConfigValueFrom{Json: it.ValueFrom.JSON}
		switch {
		case it.ValueFrom.Env != "" && it.ValueFrom.Path != "":
			return nil, fmt.Errorf("valueFrom: set env or path, not both")
		case it.ValueFrom.Env != "":
			from.Source = &agentpb.ConfigValueFrom_Env{Env: it.ValueFrom.Env}
		case it.ValueFrom.Path != "":
			from.Source = &agentpb.ConfigValueFrom_Path{Path: it.ValueFrom.Path}
		default:
			return nil, fmt.Errorf("valueFrom: set env or path")
		}
		item.V = &agentpb.ConfigItem_ValueFrom{ValueFrom: from}
	default:
		return nil, fmt.Errorf("set value or valueFrom")
	}
	return item, nil
}
