package update

import (
	"encoding/json"
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/redact"
)

// secretOutputs returns the values to remove from text bound for the
// Update's status, events and logs: those of the secret outputs among
// outputs, each secret's JSON text and every string inside it. The agent
// already redacts what it sends; this is a second line, since the
// controller alone holds the secret values in clear text (it asks for them
// to fill the outputs Secret).
func secretOutputs(outputs map[string]*agentpb.OutputValue) *redact.Set {
	set := redact.New()
	for _, v := range outputs {
		if v.GetSecret() && v.GetValue() != nil {
			set.Add(secretStrings(v.GetValue())...)
		}
	}
	return set
}

// secretStrings returns the texts that would reveal v: every string inside
// it and, for a structured value, its JSON form. Secret numbers and
// booleans are not scrubbed: replacing "1" or "true" everywhere would
// destroy messages while hiding nothing. Empty strings are left out; they
// reveal nothing and would match everywhere.
func secretStrings(v *structpb.Value) []string {
	var out []string
	switch v.GetKind().(type) {
	case *structpb.Value_StructValue, *structpb.Value_ListValue:
		if b, err := json.Marshal(v.AsInterface()); err == nil {
			out = append(out, string(b))
		}
	}
	var walk func(*structpb.Value)
	walk = func(v *structpb.Value) {
		switch k := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			out = append(out, k.StringValue)
		case *structpb.Value_StructValue:
			for _, f := range k.StructValue.GetFields() {
				walk(f)
			}
		case *structpb.Value_ListValue:
			for _, e := range k.ListValue.GetValues() {
				walk(e)
			}
		}
	}
	walk(v)
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}
