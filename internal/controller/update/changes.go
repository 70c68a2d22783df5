package update

import (
	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// maxResourceChanges caps a preview's status.resourceChanges at the API's
// limit, so the summary of a large stack stays small.
const maxResourceChanges = 500

// changeCollector gathers the resource changes of a preview from its engine
// events. Only a resourcePreEvent's metadata is read (URN, type and
// operation), which carries no property values, so nothing secret is kept.
type changeCollector struct {
	resources []autov1alpha1.ResourceChange
	truncated bool
	seen      map[string]bool
}

// observe records e when it announces a resource step other than "same".
func (c *changeCollector) observe(e *agentpb.EngineEvent) {
	urn, typ, op := stepOf(e)
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
	if len(c.resources) >= maxResourceChanges {
		c.truncated = true
		return
	}
	c.resources = append(c.resources, autov1alpha1.ResourceChange{URN: urn, Type: typ, Op: op})
}

// stepOf returns the URN, type and operation of a resourcePreEvent, or
// empty strings for any other event.
func stepOf(e *agentpb.EngineEvent) (urn, typ, op string) {
	if e.GetType() != "resourcePreEvent" {
		return "", "", ""
	}
	md := e.GetEvent().GetFields()["resourcePreEvent"].GetStructValue().GetFields()["metadata"].GetStructValue().GetFields()
	return md["urn"].GetStringValue(), md["type"].GetStringValue(), md["op"].GetStringValue()
}
