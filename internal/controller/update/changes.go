package update

import (
	"slices"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/redact"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// maxResourceChanges caps a preview's status.resourceChanges at the API's
// limit, so the summary of a large stack stays small.
const maxResourceChanges = 500

// changeCollector gathers the resource changes of a preview from its engine
// events. For status, only a resourcePreEvent's metadata is read (URN,
// type, operation and the names of the changed properties), never
// property values. With values (a preview that saves its plan), it also
// builds the value diff, whose values the engine has blinded where they
// are secret; it goes into the plan's Secret, never into status.
type changeCollector struct {
	resources []autov1alpha1.ResourceChange
	truncated bool
	seen      map[string]bool
	// values turns the value diff on.
	values bool
	diff   valuediff.Diff
}

// observe records e when it announces a resource step other than "same".
func (c *changeCollector) observe(e *agentpb.EngineEvent) {
	urn, typ, op, props := stepOf(e)
	if urn == "" || op == "" || op == "same" {
		return
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	id := op + " " + urn
	if c.seen[id] {
		return
	}
	c.seen[id] = true
	if c.values {
		md := e.GetEvent().GetFields()["resourcePreEvent"].GetStructValue().GetFields()["metadata"].GetStructValue().AsMap()
		c.diff.Add(valuediff.FromStep(md))
	}
	if len(c.resources) >= maxResourceChanges {
		c.truncated = true
		return
	}
	c.resources = append(c.resources, autov1alpha1.ResourceChange{URN: urn, Type: typ, Op: op, Properties: props})
}

// maxProperties caps the property names kept per resource at the API's
// limit.
const maxProperties = 64

// stepOf returns the URN, type and operation of a resourcePreEvent, and
// the names of the properties whose change causes the step (the metadata's
// "diffs", sorted, at most maxProperties), or empty values for any other
// event. The metadata's old and new states, which hold values, are never
// read.
func stepOf(e *agentpb.EngineEvent) (urn, typ, op string, props []string) {
	if e.GetType() != "resourcePreEvent" {
		return "", "", "", nil
	}
	md := e.GetEvent().GetFields()["resourcePreEvent"].GetStructValue().GetFields()["metadata"].GetStructValue().GetFields()
	for _, v := range md["diffs"].GetListValue().GetValues() {
		if name := v.GetStringValue(); name != "" && !slices.Contains(props, name) {
			props = append(props, name)
		}
	}
	slices.Sort(props)
	if len(props) > maxProperties {
		props = props[:maxProperties]
	}
	return md["urn"].GetStringValue(), md["type"].GetStringValue(), md["op"].GetStringValue(), props
}

// encodedDiff is the value diff, with every secret value the operation
// returned masked on top of the engine's own blinding, encoded; nil when
// values were not collected.
func (c *changeCollector) encodedDiff(secrets *redact.Set) ([]byte, error) {
	if c == nil || !c.values {
		return nil, nil
	}
	d := c.diff
	d.Resources = make([]valuediff.Resource, len(c.diff.Resources))
	for i, r := range c.diff.Resources {
		r.Properties = append([]valuediff.Property(nil), r.Properties...)
		for j := range r.Properties {
			p := &r.Properties[j]
			p.Old, p.New = secrets.Redact(p.Old), secrets.Redact(p.New)
		}
		d.Resources[i] = r
	}
	return valuediff.Encode(d)
}
