package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/change/policy"
	"github.com/stackyard/stackyard/internal/forge"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// maxListed is how many changed resources a comment lists per Stack.
const maxListed = 30

// reconcilePosts posts each pull request whose previews ended, or that
// was skipped, and whose head is not posted yet: one comment, edited from
// head to head, and a commit status.
func (s *session) reconcilePosts(ctx context.Context) (sreconcile.Result, error) {
	for i := range s.p.Status.PullRequests.PullRequests {
		e := &s.p.Status.PullRequests.PullRequests[i]
		switch e.Phase {
		case promotionv1alpha1.PullRequestPreviewed, promotionv1alpha1.PullRequestFailed, promotionv1alpha1.PullRequestSkipped:
		default:
			continue
		}
		if e.Posted == e.Head {
			continue
		}
		if err := s.post(ctx, e); err != nil {
			msg := sreconcile.Truncate(fmt.Sprintf("posting to pull request #%d: %v", e.Number, err), 1024)
			s.p.Status.PullRequests.Error = msg
			s.event(corev1.EventTypeWarning, EventForgeFailed, msg)
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(reasonForge, errors.New(msg))
		}
		e.Posted = e.Head
		if e.Phase != promotionv1alpha1.PullRequestSkipped {
			s.event(corev1.EventTypeNormal, EventPreviewed, fmt.Sprintf("pull request #%d at %s: %s", e.Number, change.ShortCommit(e.Head), e.Message))
		}
	}
	return sreconcile.ResultEmpty, nil
}

// post writes e's comment, creating it (or finding it by its marker, when
// a status was lost) the first time, and sets the commit status.
func (s *session) post(ctx context.Context, e *promotionv1alpha1.PullRequestStatus) error {
	body, err := s.comment(ctx, e)
	if err != nil {
		return err
	}
	if err := s.writeComment(ctx, e.Number, &e.CommentID, s.marker(), body); err != nil {
		return err
	}
	return s.finalStatus(ctx, e)
}

// writeComment makes body the comment *id of pull request number: it
// edits it, finding it by marker first when its id is not known (a status
// lost), and creates it when there is none or it is gone, recording its
// id in *id.
func (s *session) writeComment(ctx context.Context, number int64, id *string, marker, body string) error {
	var err error
	if *id == "" {
		if *id, err = s.forge.FindComment(ctx, number, marker); err != nil {
			return err
		}
	}
	if *id != "" {
		if err = s.forge.EditComment(ctx, number, *id, body); !errors.Is(err, forge.ErrCommentGone) {
			return err
		}
	}
	*id, err = s.forge.CreateComment(ctx, number, body)
	return err
}

// finalStatus sets the commit status of e's ended previews; a skipped
// pull request gets none.
func (s *session) finalStatus(ctx context.Context, e *promotionv1alpha1.PullRequestStatus) error {
	st := forge.Status{Context: StatusContext(s.p.Name), TargetURL: s.link(), Description: e.Message}
	switch e.Phase {
	case promotionv1alpha1.PullRequestPreviewed:
		st.State = "success"
	case promotionv1alpha1.PullRequestFailed:
		st.State = "failure"
	default:
		return nil
	}
	return s.forge.SetStatus(ctx, e.Head, st)
}

// marker is the hidden line that makes a comment the Pipeline's.
func (s *session) marker() string {
	return fmt.Sprintf("<!-- stackyard:pull-request-preview %s/%s -->", s.p.Namespace, s.p.Name)
}

// comment renders e's comment in Markdown: per Stack, what its preview
// would change, or why it failed; for each, the value diff (secret values
// masked, as approvers see it).
func (s *session) comment(ctx context.Context, e *promotionv1alpha1.PullRequestStatus) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n### stackyard preview of `%s`\n\n", s.marker(), change.ShortCommit(e.Head))
	fmt.Fprintf(&b, "Pipeline `%s/%s`", s.p.Namespace, s.p.Name)
	if link := s.link(); link != "" {
		fmt.Fprintf(&b, " ([dashboard](%s))", link)
	}
	b.WriteString("\n\n")
	if e.Phase == promotionv1alpha1.PullRequestSkipped {
		b.WriteString(e.Message + ".\n")
		return b.String(), nil
	}
	b.WriteString("| Stage | Stack | Preview |\n|---|---|---|\n")
	for _, sp := range e.Stacks {
		what := change.DescribeSummary(sp.Summary)
		if sp.Failure != "" {
			what = "**failed**: " + cell(sp.Failure)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(sp.Stage), cell(sp.Stack), what)
	}
	policies, err := s.policies(ctx, e)
	if err != nil {
		return "", err
	}
	if len(policies) > 0 {
		b.WriteString("\nWhat the stages' policies would decide, were this merged and promoted:\n\n")
		for _, line := range policies {
			b.WriteString("- " + line + "\n")
		}
	}
	for _, sp := range e.Stacks {
		if sp.Summary == nil || sp.Update == "" {
			continue
		}
		details, err := s.details(ctx, sp)
		if err != nil {
			return "", err
		}
		if details != "" {
			fmt.Fprintf(&b, "\n<details><summary>%s: %s</summary>\n\n%s\n</details>\n", cell(sp.Stack), change.DescribeSummary(sp.Summary), details)
		}
	}
	if b.Len() > maxComment {
		return b.String()[:maxComment] + "\n\n… cut: the preview is longer than a comment holds.\n", nil
	}
	return b.String(), nil
}

// policies evaluates, stage by stage, the stage's policy rules on the
// previews of e's head against its Stacks, as a promotion into the stage
// would, and says which fired: a pull request is never gated by them, but
// its author and reviewers learn what its promotion would meet. A stage
// whose previews did not all succeed is left out.
func (s *session) policies(ctx context.Context, e *promotionv1alpha1.PullRequestStatus) ([]string, error) {
	var lines []string
	for _, name := range s.p.Spec.PullRequests.Stages {
		stage := &promotionv1alpha1.Stage{}
		if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: name}, stage); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, sreconcile.NewGeneric("", fmt.Errorf("reading stage %s: %w", name, err))
		}
		if len(stage.Spec.Policies) == 0 {
			continue
		}
		// The facts a promotion of the head into the stage would have.
		p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pull-request-%d", e.Number)},
			Spec: promotionv1alpha1.PromotionSpec{Stage: name, Release: fmt.Sprintf("pull request #%d", e.Number)}}
		p.Status.Commit = e.Head
		var previews []promotionv1alpha1.StackPreview
		complete := true
		for _, sp := range e.Stacks {
			if sp.Stage != name {
				continue
			}
			if sp.Summary == nil || sp.Update == "" {
				complete = false
				break
			}
			upd := &autov1alpha1.Update{}
			if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: sp.Update}, upd); err != nil {
				return nil, sreconcile.NewGeneric("", fmt.Errorf("reading preview Update %s: %w", sp.Update, err))
			}
			sum, changes := change.Summarize(upd, maxPolicyChanges)
			previews = append(previews, promotionv1alpha1.StackPreview{Name: sp.Stack, Summary: sum, Changes: changes})
		}
		if !complete {
			continue
		}
		compiled, err := policy.Compile(stage.Spec.Policies)
		var results []promotionv1alpha1.PolicyResult
		if err == nil {
			results, err = compiled.Evaluate(ctx, policy.FactsOf(p, previews, nil))
		}
		if err != nil {
			lines = append(lines, fmt.Sprintf("stage %s: its policies cannot be evaluated: %s", cell(name), cell(err.Error())))
			continue
		}
		for _, r := range results {
			switch {
			case !r.Fired:
				lines = append(lines, fmt.Sprintf("stage %s, policy %s: passes", cell(name), cell(r.Name)))
			case r.Action == promotionv1alpha1.PolicyRefuse:
				lines = append(lines, fmt.Sprintf("stage %s, policy %s: **would refuse** the promotion: %s", cell(name), cell(r.Name), cell(r.Message)))
			default:
				lines = append(lines, fmt.Sprintf("stage %s, policy %s: would ask for %d more approval(s): %s", cell(name), cell(r.Name), max(r.Required, 1), cell(r.Message)))
			}
		}
	}
	return lines, nil
}

// maxPolicyChanges is how many changes of a preview the policies see, as
// a promotion's status keeps.
const maxPolicyChanges = 200

// maxComment bounds a comment (GitHub takes 65,536 characters).
const maxComment = 60000

// details renders what the preview sp would change: the value diff the
// preview saved, as `pulumi preview --diff` shows it (secret values
// masked by the engine), or, without one, the resources and the names of
// their changed properties.
func (s *session) details(ctx context.Context, sp promotionv1alpha1.PullRequestStackPreview) (string, error) {
	upd := &autov1alpha1.Update{}
	if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: sp.Update}, upd); err != nil {
		return "", sreconcile.NewGeneric("", fmt.Errorf("reading preview Update %s: %w", sp.Update, err))
	}
	if diff, ok, err := s.valueDiff(ctx, upd); err != nil || ok {
		if err != nil || len(diff.Resources) == 0 {
			return "", err
		}
		var b strings.Builder
		for _, r := range diff.Resources {
			fmt.Fprintf(&b, "%s %s %s %s\n", valuediff.OpSign(r.Op), r.Op, r.Type, urnName(r.URN))
			for _, p := range r.Properties {
				fmt.Fprintf(&b, "    %s %s: %s\n", valuediff.KindSign(p.Kind), p.Path, p.Describe())
			}
			if r.Truncated {
				b.WriteString("    … more properties changed\n")
			}
		}
		if diff.Truncated {
			b.WriteString("… more resources changed\n")
		}
		return fenced("diff", b.String()), nil
	}
	_, changes := change.Summarize(upd, maxListed)
	var b strings.Builder
	for _, rc := range changes {
		fmt.Fprintf(&b, "- `%s` %s `%s`", rc.Op, cell(rc.Type), cell(urnName(rc.URN)))
		if len(rc.Properties) > 0 {
			fmt.Fprintf(&b, ": %s", cell(strings.Join(rc.Properties, ", ")))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// valueDiff reads the value diff the preview upd saved beside its plan;
// ok is false when it saved none.
func (s *session) valueDiff(ctx context.Context, upd *autov1alpha1.Update) (diff valuediff.Diff, ok bool, err error) {
	if upd.Status.Plan == "" {
		return diff, false, nil
	}
	secret := &corev1.Secret{}
	if err := s.r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: upd.Status.Plan}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return diff, false, nil
		}
		return diff, false, sreconcile.NewGeneric("", fmt.Errorf("reading the plan Secret of preview %s: %w", upd.Name, err))
	}
	data := secret.Data[autov1alpha1.DiffKey]
	if len(data) == 0 {
		return diff, false, nil
	}
	if diff, err = valuediff.Decode(data); err != nil {
		return diff, false, nil
	}
	return diff, true, nil
}

// fenced puts text in a Markdown code block of lang, fenced with more
// backticks than any run in text, so that no value can end it.
func fenced(lang, text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + lang + "\n" + text + fence + "\n"
}

// urnName is the resource's name, the last part of its URN.
func urnName(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}

// cell makes text safe in a Markdown table cell and in a code span: no
// line breaks, pipes or backticks.
func cell(text string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "|", "\\|", "`", "'", "<", "&lt;").Replace(text)
}
