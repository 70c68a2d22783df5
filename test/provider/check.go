package provider

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// valueKind is the JSON-schema type an input property must have.
type valueKind int

const (
	kindString valueKind = iota
	kindInteger
	kindNumber
	kindBool
	kindMap
)

// inputSpec describes one input property of a resource: its type, whether
// the program must set it, whether changing it replaces the resource, and
// any further rule its value must follow.
type inputSpec struct {
	name     string
	kind     valueKind
	required bool
	// replaces is true when a change to the property can only be applied by
	// creating a new resource and deleting the old one.
	replaces bool
	// def, when not nil, is stored by Check when the program leaves the
	// property out, so Diff never sees "absent" and "default" as different.
	def *resource.PropertyValue
	// validate returns why a well-typed value is still unacceptable, or "".
	validate func(v resource.PropertyValue) string
}

// maxRandomLength bounds Random.length so a typo cannot ask for gigabytes.
const maxRandomLength = 4096

// maxSleepSeconds bounds Sleep.seconds so a typo cannot hang a test for days.
const maxSleepSeconds = 3600

var falseValue = resource.NewBoolProperty(false)

// inputSpecs lists, for every resource token, its input properties in the
// order they are checked and diffed.
var inputSpecs = map[string][]inputSpec{
	FileType: {
		{name: "path", kind: kindString, required: true, replaces: true, validate: func(v resource.PropertyValue) string {
			if !filepath.IsAbs(v.StringValue()) {
				return fmt.Sprintf("must be an absolute path, got %q", v.StringValue())
			}
			return ""
		}},
		{name: "content", kind: kindString, required: true},
	},
	RandomType: {
		{name: "length", kind: kindInteger, required: true, replaces: true, validate: func(v resource.PropertyValue) string {
			if n := v.NumberValue(); n > maxRandomLength {
				return fmt.Sprintf("must be at most %d, got %v", maxRandomLength, n)
			}
			return ""
		}},
		{name: "keepers", kind: kindMap, replaces: true},
	},
	SleepType: {
		{name: "seconds", kind: kindNumber, required: true, validate: func(v resource.PropertyValue) string {
			if n := v.NumberValue(); n < 0 || n > maxSleepSeconds || math.IsNaN(n) {
				return fmt.Sprintf("must be a number of seconds from 0 to %d, got %v", maxSleepSeconds, n)
			}
			return ""
		}},
	},
	FailType: {
		{name: "message", kind: kindString, required: true},
		{name: "fail", kind: kindBool, def: &falseValue},
	},
}

// CheckFailure is one problem Check found in a resource's inputs. Property
// names the offending input so the engine's error points at it.
type CheckFailure struct {
	// Property is the input's name, or "" for a problem with the whole map.
	Property string
	// Reason says what is wrong, without repeating the property name.
	Reason string
}

// String renders the failure as "property: reason", the text sent to the
// engine, so the property is named even where the engine drops it.
func (f CheckFailure) String() string {
	if f.Property == "" {
		return f.Reason
	}
	return f.Property + ": " + f.Reason
}

// checkInputs validates a program's inputs for the resource type token and
// returns them with defaults filled in. Values that are not yet known (in a
// preview) are accepted as they are; they are checked again once known.
func checkInputs(token string, news resource.PropertyMap) (resource.PropertyMap, []CheckFailure) {
	specs, ok := inputSpecs[token]
	if !ok {
		return news, []CheckFailure{{Reason: fmt.Sprintf("unknown resource type %q", token)}}
	}
	var failures []CheckFailure
	known := map[string]bool{}
	out := resource.PropertyMap{}
	for _, spec := range specs {
		known[spec.name] = true
		v, present := news[resource.PropertyKey(spec.name)]
		if !present || v.IsNull() {
			if spec.def != nil {
				out[resource.PropertyKey(spec.name)] = *spec.def
			} else if spec.required {
				failures = append(failures, CheckFailure{spec.name, "required property is missing"})
			}
			continue
		}
		out[resource.PropertyKey(spec.name)] = v
		if reason := checkValue(spec, v); reason != "" {
			failures = append(failures, CheckFailure{spec.name, reason})
		}
	}
	var extra []string
	for k := range news {
		if !known[string(k)] && !strings.HasPrefix(string(k), "__") {
			extra = append(extra, string(k))
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		names := make([]string, 0, len(specs))
		for _, spec := range specs {
			names = append(names, spec.name)
		}
		failures = append(failures, CheckFailure{k, "unknown property; " + token + " takes " + strings.Join(names, ", ")})
	}
	return out, failures
}

// checkValue returns why v is not acceptable for spec, or "" if it is.
func checkValue(spec inputSpec, v resource.PropertyValue) string {
	v = plain(v)
	if isUnknown(v) {
		return ""
	}
	switch spec.kind {
	case kindString:
		if !v.IsString() {
			return "must be a string"
		}
	case kindInteger:
		if !v.IsNumber() || v.NumberValue() != math.Trunc(v.NumberValue()) || v.NumberValue() < 1 {
			return "must be a positive integer"
		}
	case kindNumber:
		if !v.IsNumber() {
			return "must be a number"
		}
	case kindBool:
		if !v.IsBool() {
			return "must be a boolean"
		}
	case kindMap:
		if !v.IsObject() {
			return "must be a map"
		}
	}
	if spec.validate != nil {
		return spec.validate(v)
	}
	return ""
}

// plain strips secret and known-output wrappers, leaving the value itself.
func plain(v resource.PropertyValue) resource.PropertyValue {
	for {
		switch {
		case v.IsSecret():
			v = v.SecretValue().Element
		case v.IsOutput() && v.OutputValue().Known:
			v = v.OutputValue().Element
		default:
			return v
		}
	}
}

// isUnknown reports whether v (after unwrapping) is not yet known, as
// happens in a preview when an input depends on another resource's output.
func isUnknown(v resource.PropertyValue) bool {
	v = plain(v)
	return v.IsComputed() || (v.IsOutput() && !v.OutputValue().Known)
}
