package update

import (
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// redacted replaces a secret value in text the controller writes.
const redacted = "[secret]"

// scrubber removes the values of secret outputs from text bound for the
// Update's status, events and logs. The agent already redacts what it
// sends; this is a second line, since the controller alone holds the secret
// values in clear text (it asks for them to fill the outputs Secret).
type scrubber struct {
	replacer *strings.Replacer
}

// newScrubber returns a scrubber for the secret outputs among outputs: each
// secret's JSON text and every string inside it.
func newScrubber(outputs map[string]*agentpb.OutputValue) *scrubber {
	var values []string
	for _, v := range outputs {
		if !v.GetSecret() || v.GetValue() == nil {
			continue
		}
		values = append(values, secretStrings(v.GetValue())...)
	}
	if len(values) == 0 {
		return &scrubber{}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	values = slices.Compact(values)
	pairs := make([]string, 0, 2*len(values))
	for _, v := range values {
		pairs = append(pairs, v, redacted)
	}
	return &scrubber{replacer: strings.NewReplacer(pairs...)}
}

// scrub returns s without any secret value.
func (s *scrubber) scrub(text string) string {
	if s == nil || s.replacer == nil {
		return text
	}
	return s.replacer.Replace(text)
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
