package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/change/policy"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// pipelineView is a pipeline: its stages as a graph, what waits for a
// person, and its releases' way through the stages.
type pipelineView struct {
	Namespace, Name string
	// Repo and Branch (or Semver) are what the pipeline follows.
	Repo, Ref string
	// Ready is the pipeline's Ready condition, as a word and a message.
	Ready, ReadyMessage string
	Graph               Layout
	Stages              []stageView
	// Waiting are the promotions that wait for a person's approval.
	Waiting []promotionView
	// Timeline is each release, newest first, with where it went.
	Timeline []timelineRow
	// PullRequests are the open pull requests the pipeline previews
	// (spec.pullRequests), with their previews and review stacks.
	PullRequests []pullRequestView
}

// pullRequestView is an open pull request as the pipeline page shows it:
// its preview, and its review stack.
type pullRequestView struct {
	promotionv1alpha1.PullRequestStatus
	// Review is its review stack; nil without one.
	Review *reviewStackView
}

// reviewStackView is a pull request's review stack: what the Pipeline
// recorded, and the Stack's outputs, only to those who may list Stacks,
// and only from the Stack whose UID the Pipeline recorded.
type reviewStackView struct {
	promotionv1alpha1.ReviewStackStatus
	// Linked: the reader may open the Stack's page.
	Linked  bool
	Outputs []output
}

// stageView is a stage as its graph node and card show it.
type stageView struct {
	Name       string
	Node       Node
	Release    *promotionv1alpha1.StageRelease
	Author     string
	Health     string
	Message    string
	WaitingFor string
	// Stacks are the Stacks the stage deploys (named, or selected and
	// consenting: change.Members), with their own health.
	Stacks []stackHealth
	// Unconsented are the Stacks the stage's selector matches that do not
	// consent to it, which it leaves alone.
	Unconsented []string
	// Active is the promotion running or waiting in the stage, if any.
	Active *promotionView
	// Approval says how many approvals the stage asks for, if any.
	Approval  string
	Preview   bool
	Frozen    bool
	AutoPromo bool
}

type stackHealth struct {
	Name, Health, Message string
}

// promotionView is a promotion as a list shows it.
type promotionView struct {
	Name, Namespace, Stage, Release, Phase, Message, RequestedBy string
	Rollback                                                     bool
	// AwaitsApproval: its plan is decided and people must approve it, or
	// the next wave of its rollout.
	AwaitsApproval bool
	Approvals      int
	// Wave is the wave of its rollout that waits for approval; 0 when
	// none does.
	Wave int32
	// Required is the most approvals any requirement asks for: the
	// stage's policy or a fired RequireApproval policy rule.
	Required int32
	// Rules say what each fired RequireApproval rule asks for.
	Rules   []string
	Created any
}

// timelineRow is one release and, per stage in graph order, what
// happened to it there.
type timelineRow struct {
	Name, SHA, Subject, Author, Tag string
	Created                         any
	Cells                           []timelineCell
}

// timelineCell is a release in a stage: Current, Verified, Failed, or ""
// when it never went there, and since when.
type timelineCell struct {
	Stage, State string
	Since        any
	Promotion    string
}

// listIn lists objects of one namespace ("" for all) from the cache.
func (s *Server) listIn(ctx context.Context, list client.ObjectList, ns string) error {
	return s.reader.List(ctx, list, client.InNamespace(ns))
}

// pipelines returns the pipelines the session may see, optionally of one
// namespace and name.
func (s *Server) pipelines(ctx context.Context, sess *session, ns, name string) ([]pipelineView, error) {
	pls, allowed, err := s.pipelineNamespaces(ctx, sess, stagesKind, ns)
	if err != nil {
		return nil, err
	}
	var out []pipelineView
	for _, namespace := range allowed {
		objs, err := s.namespaceObjects(ctx, namespace)
		if err != nil {
			return nil, err
		}
		if objs.mayStacks, err = s.mayList(ctx, sess, stacksKind, namespace); err != nil {
			return nil, err
		}
		for i := range pls {
			p := &pls[i]
			if p.Namespace != namespace || (name != "" && p.Name != name) {
				continue
			}
			out = append(out, buildPipeline(p, objs))
		}
	}
	slices.SortFunc(out, func(a, b pipelineView) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// pipelineNamespaces lists the pipelines of ns ("" for every namespace),
// and the namespaces among theirs where the user may list k.
func (s *Server) pipelineNamespaces(ctx context.Context, sess *session, k kind, ns string) ([]promotionv1alpha1.Pipeline, []string, error) {
	var pls promotionv1alpha1.PipelineList
	if err := s.listIn(ctx, &pls, ns); err != nil {
		return nil, nil, err
	}
	namespaces := make([]string, 0, len(pls.Items))
	for _, p := range pls.Items {
		namespaces = append(namespaces, p.Namespace)
	}
	allowed, err := s.readable(ctx, sess, k, namespaces)
	return pls.Items, allowed, err
}

// objects are a namespace's change-management objects and Stacks.
type objects struct {
	stages     []promotionv1alpha1.Stage
	releases   []promotionv1alpha1.Release
	promotions []promotionv1alpha1.Promotion
	stacks     map[string]*pulumiv1.Stack
	// stackList holds the same Stacks, as listed.
	stackList []pulumiv1.Stack
	// mayStacks: the user may list the namespace's Stacks.
	mayStacks bool
}

func (s *Server) namespaceObjects(ctx context.Context, ns string) (*objects, error) {
	var stages promotionv1alpha1.StageList
	var releases promotionv1alpha1.ReleaseList
	var promotions promotionv1alpha1.PromotionList
	var stacks pulumiv1.StackList
	for _, l := range []client.ObjectList{&stages, &releases, &promotions, &stacks} {
		if err := s.listIn(ctx, l, ns); err != nil {
			return nil, err
		}
	}
	o := &objects{stages: stages.Items, releases: releases.Items, promotions: promotions.Items, stacks: map[string]*pulumiv1.Stack{}, stackList: stacks.Items}
	for i := range stacks.Items {
		o.stacks[stacks.Items[i].Name] = &stacks.Items[i]
	}
	return o, nil
}

func buildPipeline(p *promotionv1alpha1.Pipeline, o *objects) pipelineView {
	v := pipelineView{Namespace: p.Namespace, Name: p.Name, Repo: p.Spec.Git.RepoURL, Ref: p.Spec.Git.Branch}
	if c := p.Spec.Git.SemverConstraint; c != "" {
		v.Ref = "tags " + c
	}
	v.Ready, v.ReadyMessage = readiness(p.Status.Conditions)
	var stages []*promotionv1alpha1.Stage
	for i := range o.stages {
		if o.stages[i].Spec.Pipeline == p.Name {
			stages = append(stages, &o.stages[i])
		}
	}
	slices.SortFunc(stages, func(a, b *promotionv1alpha1.Stage) int { return strings.Compare(a.Name, b.Name) })
	graph := make([]GraphStage, 0, len(stages))
	for _, st := range stages {
		graph = append(graph, GraphStage{Name: st.Name, Direct: st.Spec.Sources.Direct, Upstream: st.Spec.Sources.Stages})
	}
	v.Graph = LayoutGraph(graph)
	all := map[string]bool{}
	for _, st := range stages {
		all[st.Name] = len(st.Spec.Sources.Stages) > 1 && st.Spec.Sources.AvailabilityStrategy == promotionv1alpha1.All
	}
	for i := range v.Graph.Edges {
		v.Graph.Edges[i].All = all[v.Graph.Edges[i].To] && v.Graph.Edges[i].From != ""
	}
	releases := map[string]*promotionv1alpha1.Release{}
	for i := range o.releases {
		if o.releases[i].Spec.Pipeline == p.Name {
			releases[o.releases[i].Name] = &o.releases[i]
		}
	}
	for i, st := range stages {
		sv := buildStage(st, v.Graph.Nodes[i], releases, o)
		if !o.mayStacks {
			// The Stacks' own conditions are for those who may read
			// Stacks; the stage's health (its status) stays.
			sv.Stacks = nil
		}
		v.Stages = append(v.Stages, sv)
	}
	for _, sv := range v.Stages {
		if sv.Active != nil && sv.Active.AwaitsApproval {
			v.Waiting = append(v.Waiting, *sv.Active)
		}
	}
	v.Timeline = timeline(releases, v.Stages)
	v.PullRequests = pullRequests(p, o)
	return v
}

// pullRequests are the open pull requests p's status records, with each
// review stack's outputs where the reader may list Stacks.
func pullRequests(p *promotionv1alpha1.Pipeline, o *objects) []pullRequestView {
	if p.Status.PullRequests == nil {
		return nil
	}
	out := make([]pullRequestView, 0, len(p.Status.PullRequests.PullRequests))
	for _, pr := range p.Status.PullRequests.PullRequests {
		v := pullRequestView{PullRequestStatus: pr}
		if rs := pr.ReviewStack; rs != nil {
			v.Review = &reviewStackView{ReviewStackStatus: *rs}
			if stack := o.stacks[rs.Name]; o.mayStacks && stack != nil && rs.UID != "" && stack.UID == rs.UID {
				v.Review.Linked = true
				v.Review.Outputs = outputsOf(stack, 200)
			}
		}
		out = append(out, v)
	}
	return out
}

// outputsOf are stack's outputs by name (those Pulumi marks secret are
// "[secret]" in its status already), each cut at limit characters (0:
// whole).
func outputsOf(stack *pulumiv1.Stack, limit int) []output {
	out := make([]output, 0, len(stack.Status.Outputs))
	for _, name := range sortedKeys(stack.Status.Outputs) {
		value := string(stack.Status.Outputs[name].Raw)
		if limit > 0 {
			value = truncate(value, limit)
		}
		out = append(out, output{Name: name, Value: value})
	}
	return out
}

func buildStage(st *promotionv1alpha1.Stage, node Node, releases map[string]*promotionv1alpha1.Release, o *objects) stageView {
	sv := stageView{
		Name: st.Name, Node: node, Release: st.Status.CurrentRelease, WaitingFor: st.Status.WaitingFor,
		Health: string(promotionv1alpha1.Unknown), Preview: st.Spec.PreviewOnly, Frozen: st.Spec.Freeze != nil,
		AutoPromo: st.Spec.AutoPromotionOptions != nil && st.Spec.AutoPromotionOptions.Enabled,
	}
	if h := st.Status.Health; h != nil {
		sv.Health, sv.Message = string(h.Status), h.Message
	}
	if cur := st.Status.CurrentRelease; cur != nil {
		if r := releases[cur.Name]; r != nil {
			sv.Author = r.Spec.Commit.Author
		}
	}
	// An invalid selector selects nothing here; the stage's status says
	// why.
	members, _ := change.Members(st, o.stackList)
	sv.Unconsented = members.Unconsented
	for _, b := range members.Bindings {
		h := change.Health([]promotionv1alpha1.StackBinding{b}, o.stacks)
		if stack := o.stacks[b.Name]; stack != nil {
			if msg := change.Unconsented(st.Name, st.Spec.PreviewOnly, b.Name, stack.Annotations); msg != "" {
				h = promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Degraded, Message: msg}
			}
		}
		sv.Stacks = append(sv.Stacks, stackHealth{Name: b.Name, Health: string(h.Status), Message: h.Message})
	}
	if a := st.Spec.Approval; a != nil {
		sv.Approval = fmt.Sprintf("%d approval(s)", a.Required)
	}
	var active []promotionv1alpha1.Promotion
	for _, p := range o.promotions {
		if p.Spec.Stage == st.Name && !p.Status.Phase.IsFinished() {
			active = append(active, p)
		}
	}
	slices.SortFunc(active, func(a, b promotionv1alpha1.Promotion) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	if len(active) > 0 {
		pv := promotionSummary(&active[0], st)
		sv.Active = &pv
	}
	return sv
}

// promotionSummary sums a promotion up for lists.
func promotionSummary(p *promotionv1alpha1.Promotion, st *promotionv1alpha1.Stage) promotionView {
	pv := promotionView{
		Name: p.Name, Namespace: p.Namespace, Stage: p.Spec.Stage, Release: p.Spec.Release, Phase: string(p.Status.Phase),
		Message: p.Status.Message, RequestedBy: p.Spec.RequestedBy, Rollback: p.Spec.Rollback, Created: p.CreationTimestamp,
	}
	if pv.Phase == "" {
		pv.Phase = string(promotionv1alpha1.PromotionPending)
	}
	for _, a := range p.Status.Approvals {
		if a.Decision == promotionv1alpha1.Approve {
			pv.Approvals++
		}
	}
	// Each requirement counts the same approvals: the most any of them
	// asks for is the least the promotion needs.
	if st != nil && st.Spec.Approval != nil {
		pv.Required = st.Spec.Approval.Required
	}
	for _, r := range policy.Approvals(p.Status.Policies) {
		pv.Required = max(pv.Required, r.Required)
		pv.Rules = append(pv.Rules, ruleRequirement(r))
	}
	// Whether it waits for approvals is the Promotion controller's to
	// decide (a rollback may skip them): its status.reason says, before
	// it starts or before a wave of its rollout.
	pv.AwaitsApproval = p.AwaitsApproval() || p.WaveAwaitingApproval() > 0
	pv.Wave = p.WaveAwaitingApproval()
	if ro := p.Status.Rollout; pv.Wave > 0 {
		// The wave that waits is counted apart, under the policy the
		// promotion recorded; the fired rules were the promotion's.
		pv.Approvals, pv.Required, pv.Rules = 0, 0, nil
		for _, a := range ro.Approval.Approvals {
			if a.Decision == promotionv1alpha1.Approve {
				pv.Approvals++
			}
		}
		if ro.ApprovalPolicy != nil {
			pv.Required = ro.ApprovalPolicy.Required
		}
	}
	return pv
}

// ruleRequirement says in words what a fired RequireApproval rule asks
// for, e.g. "policy db-replace: 2 approvals from group dba".
func ruleRequirement(r promotionv1alpha1.PolicyResult) string {
	return "policy " + r.Name + ": " + approvalsFrom(r.Required, r.From, r.RequireEach)
}

// timeline lists the pipeline's releases, newest first, each with its
// state in every stage.
func timeline(releases map[string]*promotionv1alpha1.Release, stages []stageView) []timelineRow {
	list := make([]*promotionv1alpha1.Release, 0, len(releases))
	for _, r := range releases {
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b *promotionv1alpha1.Release) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(b.Name, a.Name))
	})
	rows := make([]timelineRow, 0, len(list))
	for _, r := range list {
		c := r.Spec.Commit
		row := timelineRow{Name: r.Name, SHA: c.SHA, Subject: c.Subject, Author: c.Author, Tag: c.Tag, Created: r.CreationTimestamp}
		for _, st := range stages {
			cell := timelineCell{Stage: st.Name}
			switch {
			case has(r.Status.CurrentlyIn, st.Name):
				in := r.Status.CurrentlyIn[st.Name]
				cell.State, cell.Since, cell.Promotion = "Current", in.Since, in.Promotion
			case has(r.Status.FailedIn, st.Name):
				in := r.Status.FailedIn[st.Name]
				cell.State, cell.Since, cell.Promotion = "Failed", in.Since, in.Promotion
			case has(r.Status.VerifiedIn, st.Name):
				in := r.Status.VerifiedIn[st.Name]
				cell.State, cell.Since, cell.Promotion = "Verified", in.Since, in.Promotion
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

func has(m map[string]promotionv1alpha1.ReleaseInStage, key string) bool {
	_, ok := m[key]
	return ok
}
