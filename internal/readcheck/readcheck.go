// Package readcheck is the operator's validating admission webhook that
// refuses an edit of a governed Stack's spec naming a Secret or ConfigMap
// its author may not read. The operator previews a proposed change to a
// governed Stack with everything its spec names, and runs the program, an
// image or a pod template the edit may have changed, beside them: an
// author who may not read one of them could have it read for them. So
// every Secret and ConfigMap the new spec names (change.ReferencedObjects,
// the old references included) must be one the request's user may `get`,
// as the API server's authorizer answers a SubjectAccessReview for them.
// A Pipeline's review-stack template (spec.pullRequests.reviewStacks) is
// held to the same: the operator makes a Stack of it for every pull
// request. A validating webhook runs after the admission policies, whose
// refusals (a missing "govern") come first.
package readcheck

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/editstamp"
)

// Path is where the operator serves the webhook; the
// ValidatingWebhookConfiguration in config/webhook names it.
const Path = "/check-stack-reads"

// Register serves the webhook at Path on srv, decoding with scheme
// (which must know pulumi.com/v1 and promotion.stackyard.dev/v1alpha1) and asking the API server's authorizer
// through c.
func Register(srv webhook.Server, scheme *runtime.Scheme, c client.Client) {
	srv.Register(Path, &webhook.Admission{Handler: &Handler{Decoder: admission.NewDecoder(scheme), Reviews: c}})
}

// Handler checks what a governed Stack's edit, or a Pipeline's
// review-stack template, names.
type Handler struct {
	// Decoder decodes the Stacks of a request.
	Decoder admission.Decoder
	// Reviews creates SubjectAccessReviews.
	Reviews client.Client
}

// Handle answers one admission request: allowed unless it changes a
// governed Stack's spec (apart from the commit, change.StampsEdit) to one
// that names a Secret or ConfigMap the request's user may not read. A
// request it cannot decide about is refused, naming why.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind == "Pipeline" {
		return h.handleTemplate(ctx, req)
	}
	next, edited, err := editstamp.EditOf(h.Decoder, req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !edited {
		return admission.Allowed("")
	}
	unreadable, err := h.unreadable(ctx, req, &next.Spec)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(unreadable) > 0 {
		return admission.Denied(fmt.Sprintf("spec: Stack %s is governed by stage %s, and a change to it is previewed with everything it names; "+
			"%s may not read (the verb \"get\") %s, which it names", next.Name, change.AuthorizedStage(next.Annotations),
			req.UserInfo.Username, strings.Join(unreadable, ", ")))
	}
	return admission.Allowed("")
}

// handleTemplate answers for a Pipeline: allowed unless it sets or
// changes the template of its review stacks
// (spec.pullRequests.reviewStacks.template), or, while it is set, the
// repository or the forks whose pull requests get them, and the template
// names a Secret or ConfigMap the request's user may not read. The operator makes a Stack
// from the template for every pull request, which runs the pull request's
// program with everything the template names.
func (h *Handler) handleTemplate(ctx context.Context, req admission.Request) admission.Response {
	next, prev := &promotionv1alpha1.Pipeline{}, &promotionv1alpha1.Pipeline{}
	if err := h.Decoder.Decode(req, next); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Pipeline: %w", err))
	}
	if len(req.OldObject.Raw) > 0 {
		if err := h.Decoder.DecodeRaw(req.OldObject, prev); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Pipeline's previous version: %w", err))
		}
	}
	// The template's credentials go to the pull requests of spec.git
	// (and of forks, with allowForks): a change to either hands them to
	// other programs.
	template, before := reviewTemplate(next), reviewTemplate(prev)
	if template == nil || (equality.Semantic.DeepEqual(template, before) && equality.Semantic.DeepEqual(next.Spec.Git, prev.Spec.Git) &&
		next.Spec.PullRequests.AllowForks == prev.Spec.PullRequests.AllowForks) {
		return admission.Allowed("")
	}
	unreadable, err := h.unreadable(ctx, req, template)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(unreadable) > 0 {
		return admission.Denied(fmt.Sprintf("spec.pullRequests.reviewStacks.template: pipeline %s makes a Stack of it for every pull request, "+
			"which runs the pull request's program with everything the template names; %s may not read (the verb \"get\") %s, which it names",
			next.Name, req.UserInfo.Username, strings.Join(unreadable, ", ")))
	}
	return admission.Allowed("")
}

// reviewTemplate is p's review-stack template, or nil.
func reviewTemplate(p *promotionv1alpha1.Pipeline) *shared.StackSpec {
	if p.Spec.PullRequests == nil || p.Spec.PullRequests.ReviewStacks == nil {
		return nil
	}
	return &p.Spec.PullRequests.ReviewStacks.Template
}

// unreadable lists the Secrets and ConfigMaps spec names that the
// request's user may not read.
func (h *Handler) unreadable(ctx context.Context, req admission.Request, spec *shared.StackSpec) ([]string, error) {
	var unreadable []string
	for _, ref := range change.ReferencedObjects(spec) {
		ok, err := h.mayRead(ctx, req, ref)
		if err != nil {
			return nil, fmt.Errorf("asking whether %s may read %s: %w", req.UserInfo.Username, ref, err)
		}
		if !ok {
			unreadable = append(unreadable, ref.String())
		}
	}
	return unreadable, nil
}

// resources are the API resources of the kinds ObjectRef names.
var resources = map[string]string{"Secret": "secrets", "ConfigMap": "configmaps"}

// mayRead asks the API server's authorizer whether the request's user may
// get ref in the request's namespace.
func (h *Handler) mayRead(ctx context.Context, req admission.Request, ref change.ObjectRef) (bool, error) {
	resource, ok := resources[ref.Kind]
	if !ok {
		return false, fmt.Errorf("unknown kind %q", ref.Kind)
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range req.UserInfo.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: req.Namespace, Verb: "get", Resource: resource, Name: ref.Name},
	}}
	if err := h.Reviews.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
