// Package editstamp is the operator's mutating admission webhook that
// records who edited a governed Stack: on every write that changes a
// governed Stack's spec apart from spec.commit, it sets the annotations
// promotion.stackyard.dev/edited-by (the request's authenticated
// username) and promotion.stackyard.dev/edited-spec (the digest of the
// spec written, change.SpecDigest), over whatever the request said. The
// API server runs it before the admission policies, and
// config/policy/edit-record.yaml refuses a write that sets either
// annotation to anyone but its author, so the record cannot be forged
// by a write the webhook leaves alone. Kubernetes' own admission plugins
// record users the same way (a ServiceAccount token's bound node, a
// CertificateSigningRequest's requester): a field only the API server
// fills in from the authenticated request.
package editstamp

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

// Path is where the operator serves the webhook; the
// MutatingWebhookConfiguration in config/webhook names it.
const Path = "/stamp-stack-editor"

// Register serves the webhook at Path on srv, decoding with scheme
// (which must know pulumi.com/v1).
func Register(srv webhook.Server, scheme *runtime.Scheme) {
	srv.Register(Path, &webhook.Admission{Handler: &Handler{Decoder: admission.NewDecoder(scheme)}})
}

// Handler stamps the author of a governed Stack's edit.
type Handler struct {
	// Decoder decodes the Stacks of a request.
	Decoder admission.Decoder
}

// Handle answers one admission request: a patch that stamps the
// request's user when it changes a governed Stack's spec (apart from the
// commit), and an unchanged object otherwise. A request it cannot decode
// is refused, naming why: the API server then refuses the write
// (failurePolicy Fail), so no edit goes unrecorded.
func (h *Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	next, edited, err := EditOf(h.Decoder, req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !edited {
		return admission.Allowed("")
	}
	stamped := next.DeepCopy()
	if err := change.StampEdit(stamped, req.UserInfo.Username); err != nil {
		return admission.Errored(http.StatusForbidden, err)
	}
	return admission.Patched("", patches(stamped.Annotations)...)
}

// EditOf decodes the Stack req writes, and reports whether the write is
// an edit of a governed Stack's spec apart from the commit
// (change.StampsEdit): what this webhook stamps, and what
// internal/readcheck checks. A request that is neither a create nor an
// update edits nothing.
func EditOf(dec admission.Decoder, req admission.Request) (next *pulumiv1.Stack, edited bool, err error) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil, false, nil
	}
	next = &pulumiv1.Stack{}
	if err := dec.Decode(req, next); err != nil {
		return nil, false, fmt.Errorf("decoding the Stack: %w", err)
	}
	var prev *pulumiv1.Stack
	if req.Operation == admissionv1.Update {
		prev = &pulumiv1.Stack{}
		if err := dec.DecodeRaw(req.OldObject, prev); err != nil {
			return nil, false, fmt.Errorf("decoding the Stack's previous version: %w", err)
		}
	}
	edited, err = change.StampsEdit(prev, next)
	return next, edited, err
}

// patches are the JSON patch operations that make the object's
// annotations hold the stamp of want: only the two annotations are
// written, so fields this operator's types do not know are kept. A
// governed Stack has annotations (the stage it names), so each is added
// to the map that exists; "add" replaces one that exists (RFC 6902, 4.1).
func patches(want map[string]string) []jsonpatch.JsonPatchOperation {
	keys := []string{promotionv1alpha1.EditedByAnnotation, promotionv1alpha1.EditedSpecAnnotation}
	ops := make([]jsonpatch.JsonPatchOperation, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/annotations/" + escape(k), Value: want[k]})
	}
	return ops
}

// escape makes key one JSON pointer token (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
