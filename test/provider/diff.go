package provider

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// propertyChange is one input whose desired value differs from the state.
type propertyChange struct {
	name string
	kind pulumirpc.PropertyDiff_Kind
}

// diffInputs compares a resource's recorded state (olds, which holds every
// input as an output too, as refreshed from reality) with the checked inputs
// of the program (news). It returns the changed properties in spec order; a
// change to a property that replaces gets a *_REPLACE kind. A value that is
// not yet known counts as changed, since it may well be.
func diffInputs(token string, olds, news resource.PropertyMap) ([]propertyChange, error) {
	specs, ok := inputSpecs[token]
	if !ok {
		return nil, fmt.Errorf("unknown resource type %q", token)
	}
	var changes []propertyChange
	for _, spec := range specs {
		key := resource.PropertyKey(spec.name)
		oldV, hadOld := olds[key]
		newV, hasNew := news[key]
		hadOld = hadOld && !oldV.IsNull()
		hasNew = hasNew && !newV.IsNull()
		var kind pulumirpc.PropertyDiff_Kind
		switch {
		case !hadOld && !hasNew:
			continue
		case !hadOld:
			kind = pulumirpc.PropertyDiff_ADD
		case !hasNew:
			kind = pulumirpc.PropertyDiff_DELETE
		case isUnknown(newV) || newV.ContainsUnknowns():
			kind = pulumirpc.PropertyDiff_UPDATE
		case bare(oldV).DeepEquals(bare(newV)):
			continue
		default:
			kind = pulumirpc.PropertyDiff_UPDATE
		}
		if spec.replaces {
			kind = replacing(kind)
		}
		changes = append(changes, propertyChange{spec.name, kind})
	}
	return changes, nil
}

// replacing maps a property diff kind to its replacing counterpart.
func replacing(kind pulumirpc.PropertyDiff_Kind) pulumirpc.PropertyDiff_Kind {
	switch kind {
	case pulumirpc.PropertyDiff_ADD:
		return pulumirpc.PropertyDiff_ADD_REPLACE
	case pulumirpc.PropertyDiff_DELETE:
		return pulumirpc.PropertyDiff_DELETE_REPLACE
	case pulumirpc.PropertyDiff_UPDATE:
		return pulumirpc.PropertyDiff_UPDATE_REPLACE
	}
	return kind
}

// diffResponse turns changes into the protocol's answer: which properties
// differ, which of them force a replacement, and the detailed diff the CLI
// prints.
func diffResponse(changes []propertyChange) *pulumirpc.DiffResponse {
	resp := &pulumirpc.DiffResponse{
		Changes:         pulumirpc.DiffResponse_DIFF_NONE,
		DetailedDiff:    map[string]*pulumirpc.PropertyDiff{},
		HasDetailedDiff: true,
	}
	for _, c := range changes {
		resp.Changes = pulumirpc.DiffResponse_DIFF_SOME
		resp.Diffs = append(resp.Diffs, c.name)
		resp.DetailedDiff[c.name] = &pulumirpc.PropertyDiff{Kind: c.kind, InputDiff: true}
		switch c.kind {
		case pulumirpc.PropertyDiff_ADD_REPLACE, pulumirpc.PropertyDiff_DELETE_REPLACE,
			pulumirpc.PropertyDiff_UPDATE_REPLACE:
			resp.Replaces = append(resp.Replaces, c.name)
		}
	}
	return resp
}

// bare returns v with every secret wrapper removed, at any depth, so that
// marking a value secret (or not) is not by itself seen as a change.
func bare(v resource.PropertyValue) resource.PropertyValue {
	v = plain(v)
	switch {
	case v.IsObject():
		m := resource.PropertyMap{}
		for k, e := range v.ObjectValue() {
			m[k] = bare(e)
		}
		return resource.NewObjectProperty(m)
	case v.IsArray():
		a := make([]resource.PropertyValue, len(v.ArrayValue()))
		for i, e := range v.ArrayValue() {
			a[i] = bare(e)
		}
		return resource.NewArrayProperty(a)
	}
	return v
}
