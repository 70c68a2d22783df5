package update

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// outputsSuffix ends the name of an Update's outputs Secret, as in the
// Pulumi Kubernetes Operator v2.
const outputsSuffix = "-stack-outputs"

// OutputsSecretName returns the name of the Secret holding the outputs of
// the Update named update: "<update>-stack-outputs", as in the Pulumi
// Kubernetes Operator v2. A name that would exceed the 253 characters of an
// object name is shortened and made unique with a hash of the whole.
func OutputsSecretName(update string) string { return suffixed(update, outputsSuffix) }

// suffixed returns "<update><suffix>", shortened and made unique with a
// hash of update when it would exceed the 253 characters of an object
// name.
func suffixed(update, suffix string) string {
	name := update + suffix
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(update))
	tag := "-" + hex.EncodeToString(sum[:])[:10]
	return update[:253-len(suffix)-len(tag)] + tag + suffix
}

// invalidKeyChars are the characters a Secret key may not hold.
var invalidKeyChars = regexp.MustCompile(`[^-._a-zA-Z0-9]`)

// OutputKey returns the Secret key of the stack output named name: the name
// with every character a Secret key may not hold replaced by "_", as the
// Pulumi Kubernetes Operator v2 does.
func OutputKey(name string) string {
	return invalidKeyChars.ReplaceAllString(name, "_")
}

// outputsSecret builds the immutable Secret recording o's outputs for obj,
// owned by obj so that it goes when obj does. It returns nil when there is nothing to record. Outputs whose names
// map to the same key are resolved by name order: the last one wins.
func (r *Reconciler) outputsSecret(obj *autov1alpha1.Update, o *outcome) (*corev1.Secret, error) {
	if o.outputs == nil {
		return nil, nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: OutputsSecretName(obj.Name), Namespace: obj.Namespace},
		Immutable:  ptr.To(true),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	names := make([]string, 0, len(o.outputs))
	for name := range o.outputs {
		names = append(names, name)
	}
	slices.Sort(names)
	secrets := []string{}
	for _, name := range names {
		v := o.outputs[name]
		value := []byte("null")
		if v.GetValue() != nil {
			b, err := json.Marshal(v.GetValue().AsInterface())
			if err != nil {
				return nil, fmt.Errorf("encoding output %q: %w", name, err)
			}
			value = b
		}
		key := OutputKey(name)
		s.Data[key] = value
		secrets = slices.DeleteFunc(secrets, func(k string) bool { return k == key })
		if v.GetSecret() {
			secrets = append(secrets, key)
		}
	}
	slices.Sort(secrets)
	mask, err := json.Marshal(secrets)
	if err != nil {
		return nil, err
	}
	s.Annotations = map[string]string{autov1alpha1.SecretOutputsAnnotation: string(mask)}
	if err := controllerutil.SetControllerReference(obj, s, r.Scheme); err != nil {
		return nil, fmt.Errorf("owning the outputs Secret: %w", err)
	}
	return s, nil
}

// ensureOutputsSecret creates the outputs Secret of o for obj and returns
// its name, or "" when o has none. A Secret of that name already owned by
// obj (an earlier attempt created it, then the status write failed) is
// taken as it is: it is immutable and holds the same outcome.
//
// A failure that retrying cannot fix (the name is taken by another object,
// the outputs are too large or invalid) is returned as note, a sentence to
// append to the Update's message, with an empty name: the outcome is then
// recorded without outputs rather than never. Any other error is returned
// for the reconcile to retry.
func (r *Reconciler) ensureOutputsSecret(ctx context.Context, obj *autov1alpha1.Update, o *outcome) (name, note string, err error) {
	s, err := r.outputsSecret(obj, o)
	if err != nil {
		return "", fmt.Sprintf("the outputs were not recorded: %v", err), nil
	}
	if s == nil {
		return "", "", nil
	}
	return r.createOwnedSecret(ctx, obj, s, "the outputs were")
}

// createOwnedSecret creates s, an immutable Secret owned by obj holding
// what ("the outputs were", "the plan was": the subject of the note), and
// returns its name. A Secret of that name that an earlier attempt created
// (then the status write failed) is taken as it is: immutable, controlled
// by obj, and holding what s holds. Anyone allowed to create Secrets can
// make one of that name, owner reference included, once obj exists: taken
// for the operator's, a plan of theirs would be what the approvers of a
// promotion are bound to, with a value diff of their choosing. A failure
// retrying cannot fix is returned as note, with an empty name; any other
// error for a retry.
func (r *Reconciler) createOwnedSecret(ctx context.Context, obj *autov1alpha1.Update, s *corev1.Secret, what string) (name, note string, err error) {
	err = r.Client.Create(ctx, s)
	switch {
	case err == nil:
		return s.Name, "", nil
	case apierrors.IsAlreadyExists(err):
		existing := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, existing); err != nil {
			return "", "", fmt.Errorf("reading Secret %s: %w", s.Name, err)
		}
		if metav1.IsControlledBy(existing, obj) && sameSecret(existing, s) {
			return s.Name, "", nil
		}
		return "", fmt.Sprintf("%s not recorded: Secret %s exists and is not the one this Update made", what, s.Name), nil
	case apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsForbidden(err):
		return "", fmt.Sprintf("%s not recorded: creating Secret %s: %s", what, s.Name, apierrors.ReasonForError(err)), nil
	default:
		return "", "", fmt.Errorf("creating Secret %s: %w", s.Name, err)
	}
}

// sameSecret reports whether existing is immutable and holds what want
// holds: its data, type and the mask of secret outputs.
func sameSecret(existing, want *corev1.Secret) bool {
	if !ptr.Deref(existing.Immutable, false) || existing.Type != want.Type ||
		existing.Annotations[autov1alpha1.SecretOutputsAnnotation] != want.Annotations[autov1alpha1.SecretOutputsAnnotation] ||
		len(existing.Data) != len(want.Data) {
		return false
	}
	for k, v := range want.Data {
		if got, ok := existing.Data[k]; !ok || !bytes.Equal(got, v) {
			return false
		}
	}
	return true
}
