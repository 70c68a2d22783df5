package change

import (
	"fmt"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// SpecDigest is the digest of a Stack's spec apart from spec.commit, the
// part of it a promotion does not write: the edit that
// promotionv1alpha1.EditedSpecAnnotation records. It covers every field,
// a field added to the API later included, and inline secret values,
// which never leave the digest.
func SpecDigest(stack *pulumiv1.Stack) (string, error) {
	spec, err := specWithoutCommit(&stack.Spec)
	if err != nil {
		return "", err
	}
	return Digest([]Input{{Name: "spec", Value: spec}})
}

// Editor is who last changed a Stack's spec, as the API server
// authenticated them.
type Editor struct {
	// Username is the request's user.
	Username string
	// Spec is the SpecDigest of what they wrote.
	Spec string
}

// EditorOf says who wrote stack's current spec (apart from the commit),
// from the annotations the admission webhook stamps: ok is false when
// they are missing or describe another spec (one changed since by a
// write no webhook stamped), and then nobody is known to have written it.
// config/policy lets nobody write another's name there, so a name found
// with the current spec's digest is its author's.
func EditorOf(stack *pulumiv1.Stack) (ed Editor, ok bool, err error) {
	by := stack.Annotations[promotionv1alpha1.EditedByAnnotation]
	spec := stack.Annotations[promotionv1alpha1.EditedSpecAnnotation]
	if by == "" || spec == "" {
		return Editor{}, false, nil
	}
	now, err := SpecDigest(stack)
	if err != nil {
		return Editor{}, false, err
	}
	if now != spec {
		return Editor{}, false, nil
	}
	return Editor{Username: by, Spec: spec}, true, nil
}

// StampEdit sets on stack the annotations that say user wrote its
// current spec: what the admission webhook writes.
func StampEdit(stack *pulumiv1.Stack, user string) error {
	if user == "" {
		return fmt.Errorf("metadata.annotations[%s]: the request has no authenticated username", promotionv1alpha1.EditedByAnnotation)
	}
	digest, err := SpecDigest(stack)
	if err != nil {
		return err
	}
	if stack.Annotations == nil {
		stack.Annotations = map[string]string{}
	}
	stack.Annotations[promotionv1alpha1.EditedByAnnotation] = user
	stack.Annotations[promotionv1alpha1.EditedSpecAnnotation] = digest
	return nil
}

// StampsEdit reports whether the admission webhook stamps next, written
// over prev (nil for a new Stack), with its author: when next is
// governed (it names a stage) and its spec, apart from spec.commit,
// differs from prev's. A promotion's pin (spec.commit) keeps the stamp
// of whoever edited the rest.
func StampsEdit(prev, next *pulumiv1.Stack) (bool, error) {
	if AuthorizedStage(next.Annotations) == "" {
		return false, nil
	}
	if prev == nil {
		return true, nil
	}
	a, err := SpecDigest(prev)
	if err != nil {
		return false, err
	}
	b, err := SpecDigest(next)
	if err != nil {
		return false, err
	}
	return a != b, nil
}
