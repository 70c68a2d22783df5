// Package shard splits the Stacks of one cluster among several operator
// Deployments, in the manner of Flux's sharding.fluxcd.io/key: an object's
// label Label names the shard that reconciles it, and each shard's manager
// caches and reconciles only its own objects, under a leader election of
// its own.
//
// The default shard (no --shard) owns every object without the label, and
// every object whose label names no shard it was told of (--shards), so
// that a typo in a label leaves no Stack unreconciled. A named shard owns
// exactly the objects labelled with its name.
//
// A shard runs the Stack, Workspace and Update controllers. Everything that
// spans Stacks (Programs, pipelines and promotions, notifications, the
// dashboard, the cloud API and webhook receivers) runs in the default shard,
// which for that reason caches every Stack; named shards cache their own.
//
// The Stack controller copies a Stack's label to its Workspace and Updates
// (Stamp), so that all three move together. When a Stack moves, the shard
// it leaves stops reconciling it at once, the shard it joins waits for an
// Update the other shard still runs to finish before it takes the
// Workspace over, and Update names derived from the Stack's state keep the
// two from starting the same update twice.
package shard

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Label is the object label that names an object's shard.
const Label = "stackyard.dev/shard"

// PodLabel is the label the chart puts on each shard's operator Pods, with
// the shard's name or DefaultName. Services select it, and the leader
// labeler (internal/leader) keeps to the Pods of its own shard.
const PodLabel = "stackyard.dev/operator-shard"

// DefaultName is how the default shard is named where a name is needed
// (PodLabel, logs). It cannot be a named shard's name.
const DefaultName = "default"

// Shard is the part of the cluster's objects one operator reconciles. The
// zero value is the default shard of an installation with no named shards:
// it owns every object, as an unsharded operator does.
type Shard struct {
	// Name is this shard's name; empty for the default shard.
	Name string
	// Others are the named shards of the installation, which the default
	// shard leaves alone. A named shard ignores them.
	Others []string
}

// New checks name and others (the --shard and --shards flags) and returns
// the Shard they describe.
func New(name string, others []string) (Shard, error) {
	s := Shard{Name: name}
	if name != "" {
		if err := checkName("--shard", name); err != nil {
			return Shard{}, err
		}
	}
	seen := map[string]bool{}
	for _, o := range others {
		if err := checkName("--shards", o); err != nil {
			return Shard{}, err
		}
		if seen[o] {
			return Shard{}, fmt.Errorf("--shards: %q is listed twice", o)
		}
		seen[o] = true
		if o != name {
			s.Others = append(s.Others, o)
		}
	}
	if name != "" && len(others) > 0 && !seen[name] {
		return Shard{}, fmt.Errorf("--shard=%s is not among --shards=%s: every shard must be told the same list", name, strings.Join(others, ","))
	}
	if name != "" {
		s.Others = nil
	}
	slices.Sort(s.Others)
	return s, nil
}

// checkName checks a shard name given to flag: a DNS-1123 label, which is
// also a valid label value (the shard label's) and a valid part of the
// Deployment and lease names built from it; never the default shard's.
func checkName(flag, name string) error {
	if name == DefaultName {
		return fmt.Errorf("%s: %q is the default shard's name: the default shard is the one without --shard", flag, name)
	}
	if name == "" {
		return fmt.Errorf("%s: a shard name cannot be empty", flag)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%s: %q is not a shard name (lower-case letters, digits and '-'): %s", flag, name, strings.Join(errs, "; "))
	}
	return nil
}

// IsDefault reports whether s is the default shard.
func (s Shard) IsDefault() bool { return s.Name == "" }

// String is the shard's name, or DefaultName.
func (s Shard) String() string { return cmp.Or(s.Name, DefaultName) }

// Selector selects the objects s owns: Label=Name for a named shard, for
// the default shard every object whose Label is not one of Others
// (unlabelled ones included), or every object when there are no Others.
func (s Shard) Selector() labels.Selector {
	var req *labels.Requirement
	var err error
	switch {
	case s.Name != "":
		req, err = labels.NewRequirement(Label, selection.Equals, []string{s.Name})
	case len(s.Others) > 0:
		req, err = labels.NewRequirement(Label, selection.NotIn, s.Others)
	default:
		return labels.Everything()
	}
	if err != nil {
		// New validated every name as a label value.
		panic(fmt.Sprintf("shard %s: %v", s, err))
	}
	return labels.NewSelector().Add(*req)
}

// Owns reports whether obj belongs to s.
func (s Shard) Owns(obj metav1.Object) bool {
	return s.Selector().Matches(labels.Set(obj.GetLabels()))
}

// Of is the shard obj's label names: its Label, or DefaultName.
func Of(obj metav1.Object) string { return cmp.Or(obj.GetLabels()[Label], DefaultName) }

// Stamp gives to the shard label of from: set to from's value, or removed
// when from has none.
func Stamp(from, to metav1.Object) {
	v, ok := from.GetLabels()[Label]
	l := to.GetLabels()
	if !ok {
		delete(l, Label)
		return
	}
	if l == nil {
		l = map[string]string{}
	}
	l[Label] = v
	to.SetLabels(l)
}

// LeaderElectionID is base for the default shard, and a Lease name of its
// own for a named one, so that each shard elects its own leader.
func (s Shard) LeaderElectionID(base string) string {
	if s.Name == "" {
		return base
	}
	return s.Name + ".shard." + base
}

// Moved passes the update events of objects that entered or left s: a
// change of labels bumps no generation, so the predicates that watch for
// spec changes would miss a Stack moved into the shard.
func (s Shard) Moved() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld != nil && e.ObjectNew != nil && s.Owns(e.ObjectOld) != s.Owns(e.ObjectNew)
		},
	}
}

// ErrElsewhere is wrapped by errors about an object another shard owns.
var ErrElsewhere = errors.New("in another shard")

// Elsewhere returns the error for a reference, in the field named field,
// from an object of s to obj (a kind), which another shard owns and so s
// cannot see.
func (s Shard) Elsewhere(field, kind string, obj metav1.Object) error {
	return fmt.Errorf("%s: %s %s is %w (%s=%s) and this object is in shard %s: objects that refer to each other must be in one shard",
		field, kind, obj.GetName(), ErrElsewhere, Label, Of(obj), s)
}
