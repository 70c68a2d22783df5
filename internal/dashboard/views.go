package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// readiness sums kstatus conditions up as a word and a message.
func readiness(conds []metav1.Condition) (string, string) {
	if c := apimeta.FindStatusCondition(conds, sreconcile.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		return "Degraded", c.Message
	}
	if c := apimeta.FindStatusCondition(conds, sreconcile.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
		return "Progressing", c.Message
	}
	if c := apimeta.FindStatusCondition(conds, sreconcile.ReadyCondition); c != nil {
		if c.Status == metav1.ConditionTrue {
			return "Healthy", c.Message
		}
		return "Progressing", c.Message
	}
	return "Unknown", ""
}

func (s *Server) pipelinesPage(r *http.Request, sess *session) (string, any, error) {
	list, err := s.pipelines(r.Context(), sess, "", "")
	return "Pipelines", list, err
}

func (s *Server) pipelinePage(r *http.Request, sess *session) (string, any, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	list, err := s.pipelines(r.Context(), sess, ns, name)
	if err != nil {
		return "", nil, err
	}
	if len(list) == 0 {
		return "", nil, notFound("pipeline %s/%s not found, or you may not list its stages", ns, name)
	}
	return "Pipeline " + name, list[0], nil
}

// promotionDetail is a promotion in full.
type promotionDetail struct {
	promotionView
	Pipeline   string
	Commit     string
	Start, End any
	PlanDigest string
	// Review is what approvers decide on, as `stackyard review` shows it:
	// values only to those who may list the namespace's Stacks.
	Review       pipelinectl.Review
	Records      []promotionv1alpha1.ApprovalRecord
	Verification *promotionv1alpha1.VerificationStatus
	Stacks       []promotionv1alpha1.PromotedStack
	Updates      []updateView
	Policy       string
	// Decidable: people may approve or reject it now.
	Decidable bool
	// Rollout is its progress through the stage's waves, with the Stacks
	// of each wave; nil before it started. A stage without a rollout has
	// one only once someone intervened (one wave of every Stack).
	Rollout *rolloutView
	// Operable: it runs, so people may halt, resume or abort it.
	Operable bool
}

// rolloutView is a promotion's rollout as the page shows it: the counts,
// whether it halted, and each wave's Stacks by state.
type rolloutView struct {
	promotionv1alpha1.RolloutStatus
	Waves []waveView
}

// waveView is one wave of a rollout: whether it is the one in progress,
// its progress bar, and the run of the stage's checks against it
// (rollout.verifyEachWave) while status.rollout records one.
type waveView struct {
	pipelinectl.RolloutWave
	Current bool
	Bar     []barSegment
	Checks  *promotionv1alpha1.WaveVerification
}

// barSegment is the part of a wave's progress bar (an SVG of width 100:
// the page's CSP allows no inline styles) that its Stacks in one state
// take.
type barSegment struct {
	State    string
	X, Width float64
}

// waveBar is the progress bar of a wave's counts: a segment per state
// with Stacks, in the order succeeded, failed, updating, skipped,
// pending.
func waveBar(c promotionv1alpha1.RolloutCounts) []barSegment {
	total := float64(c.Succeeded + c.Failed + c.Updating + c.Skipped + c.Pending)
	if total == 0 {
		return nil
	}
	var (
		bar []barSegment
		x   float64
	)
	for _, part := range []struct {
		state string
		n     int32
	}{{"succeeded", c.Succeeded}, {"failed", c.Failed}, {"updating", c.Updating}, {"skipped", c.Skipped}, {"pending", c.Pending}} {
		if part.n == 0 {
			continue
		}
		w := 100 * float64(part.n) / total
		bar = append(bar, barSegment{State: part.state, X: x, Width: w})
		x += w
	}
	return bar
}

// buildRollout groups a promotion's Stacks by wave.
func buildRollout(p *promotionv1alpha1.Promotion) *rolloutView {
	ro := p.Status.Rollout
	if ro == nil {
		return nil
	}
	v := &rolloutView{RolloutStatus: *ro}
	for _, w := range pipelinectl.RolloutWaves(ro, p.Status.Stacks) {
		wv := waveView{RolloutWave: w, Current: w.Number == ro.Wave, Bar: waveBar(w.Counts)}
		if ro.Verification != nil && ro.Verification.Wave == w.Number {
			wv.Checks = ro.Verification
		}
		v.Waves = append(v.Waves, wv)
	}
	return v
}

// updateView is an Update as the pages show it. Its message and changes
// come from the agent, which redacts secret values at their source.
type updateView struct {
	Namespace, Name, Type, State, Message string
	Start, End                            any
	Changes                               map[string]int64
	Conditions                            []metav1.Condition
	// LogTail is the end of the operation's log, secrets masked by the
	// Update controller.
	LogTail []string
}

func buildUpdate(u *autov1alpha1.Update) updateView {
	v := updateView{
		Namespace: u.Namespace, Name: u.Name, Type: string(u.Spec.Type), Message: u.Status.Message, Start: u.Status.StartTime, End: u.Status.EndTime,
		Changes: u.Status.Changes, Conditions: u.Status.Conditions, LogTail: u.Status.LogTail,
	}
	switch {
	case apimeta.IsStatusConditionTrue(u.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed):
		v.State = "Failed"
	case apimeta.IsStatusConditionTrue(u.Status.Conditions, autov1alpha1.UpdateConditionTypeComplete):
		v.State = "Succeeded"
	case apimeta.IsStatusConditionTrue(u.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing) && !u.Status.NotStarted():
		v.State = "Running"
	default:
		v.State = "Pending"
	}
	return v
}

func (s *Server) promotionPage(r *http.Request, sess *session) (string, any, error) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := s.mayRead(ctx, sess, promotionsKind, ns); err != nil {
		return "", nil, err
	}
	var p promotionv1alpha1.Promotion
	err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
	if apierrors.IsNotFound(err) && s.apiReader != nil {
		// The promote and roll-back actions send the browser here the
		// moment they created the promotion, which the cache may not
		// hold yet: ask the API server before saying it does not exist.
		err = s.apiReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, notFound("promotion %s/%s not found", ns, name)
		}
		return "", nil, err
	}
	var st *promotionv1alpha1.Stage
	var stg promotionv1alpha1.Stage
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Spec.Stage}, &stg); err == nil {
		st = &stg
	}
	d := promotionDetail{
		promotionView: promotionSummary(&p, st), Commit: p.Status.Commit, Start: p.Status.StartTime, End: p.Status.EndTime,
		PlanDigest: p.Status.PlanDigest, Records: p.Status.Approvals,
		Verification: p.Status.Verification, Stacks: p.Status.Stacks,
	}
	// The previews are part of the promotion, shown to those who may
	// read it.
	recs, err := change.StackRecords(ctx, s.reader, &p)
	if err != nil {
		return "", nil, err
	}
	previews := change.Previews(&p, recs)
	plans, err := s.planData(ctx, sess, &p, previews)
	if err != nil {
		return "", nil, err
	}
	d.Review = pipelinectl.BuildReview(&p, previews, plans, true)
	if ref := p.Spec.HeldChange; ref != nil {
		// The change is the Stack's spec: shown to those who may read it.
		var held pulumiv1.Stack
		switch {
		case s.mayRead(ctx, sess, stacksKind, ns) != nil:
			d.Review.AddHeldChange(&p, nil, "you may not read Stacks in namespace "+ns)
		case s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Stack}, &held) != nil:
			d.Review.AddHeldChange(&p, nil, "")
		default:
			d.Review.AddHeldChange(&p, &held, "")
		}
	}
	if st != nil {
		d.Pipeline = st.Spec.Pipeline
		if a := st.Spec.Approval; a != nil {
			d.Policy = approvalPolicy(a)
		}
	}
	d.Decidable = d.AwaitsApproval
	d.Rollout = buildRollout(&p)
	d.Operable = p.Status.Phase == promotionv1alpha1.PromotionRunning
	// The Updates' messages and logs are shown to those who may read
	// Updates, as on their own pages.
	mayUpdates, err := s.mayList(ctx, sess, updatesKind, ns)
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, pv := range previews {
		names = append(names, pv.Update)
	}
	for _, ps := range p.Status.Stacks {
		names = append(names, ps.Update)
	}
	for _, n := range names {
		var u autov1alpha1.Update
		if !mayUpdates || n == "" || s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &u) != nil {
			continue
		}
		d.Updates = append(d.Updates, buildUpdate(&u))
	}
	return "Promotion " + name, d, nil
}

// planData reads the plan Secrets the previews of p name, with the
// dashboard's own rights, when the session's user may list Stacks in p's
// namespace: the values a preview would change are the Stacks' values.
// Others get the reason, and the review shows property names only. A
// Secret the operator cannot read is noted, not an error: the page still
// shows the rest.
func (s *Server) planData(ctx context.Context, sess *session, p *promotionv1alpha1.Promotion, previews []promotionv1alpha1.StackPreview) (pipelinectl.PlanData, error) {
	ns := p.Namespace
	ok, err := s.mayList(ctx, sess, stacksKind, ns)
	if err != nil || !ok {
		return pipelinectl.PlanData{Unreadable: "you may not list Stacks in namespace " + ns}, err
	}
	plans := pipelinectl.PlanData{Secrets: map[string]map[string][]byte{}}
	if s.apiReader == nil {
		plans.Unreadable = "the dashboard has no client for Secrets"
		return plans, nil
	}
	for _, pv := range previews {
		if pv.Plan == "" || plans.Secrets[pv.Plan] != nil {
			continue
		}
		var sec corev1.Secret
		err := s.apiReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: pv.Plan}, &sec)
		switch {
		case err == nil:
			plans.Secrets[pv.Plan] = sec.Data
		case apierrors.IsNotFound(err):
		default:
			s.log.Error(err, "Could not read a plan Secret", "namespace", ns, "secret", pv.Plan)
			plans.Unreadable = "the dashboard could not read the plan Secret; the operator log has the detail"
		}
	}
	return plans, nil
}

// approvalPolicy says an approval policy in words.
func approvalPolicy(a *promotionv1alpha1.ApprovalPolicy) string {
	text := approvalsFrom(a.Required, a.From, a.RequireEach)
	if !a.AllowSelfApproval {
		text += "; the requester's own approval does not count"
	}
	if a.ExpireAfter != nil {
		text += "; approvals expire after " + a.ExpireAfter.Duration.String()
	}
	return text
}

// approvalsFrom says how many approvals from whom, e.g. "2 approvals
// from group dba".
func approvalsFrom(required int32, from []promotionv1alpha1.Approver, each bool) string {
	var who []string
	for _, f := range from {
		if f.User != "" {
			who = append(who, "user "+f.User)
		} else {
			who = append(who, "group "+f.Group)
		}
	}
	text := pluralize(int(required), "approval", "approvals")
	if len(who) > 0 {
		text += " from " + strings.Join(who, ", ")
		if each {
			text += " (each of them)"
		}
	}
	return text
}

func pluralize(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// mayRead refuses, as not found, a namespace where the user may not list
// the kind: it does not tell whether the object exists.
func (s *Server) mayRead(ctx context.Context, sess *session, k kind, ns string) error {
	ok, err := s.mayList(ctx, sess, k, ns)
	if err != nil {
		return err
	}
	if !ok {
		if ok, err = s.mayList(ctx, sess, k, ""); err != nil {
			return err
		}
	}
	if !ok {
		return notFound("nothing to show: you may not list %s in namespace %s", k.resource, ns)
	}
	return nil
}

// stacksView is the list of every Stack the user may see.
type stacksView struct {
	Namespaces       []string
	Namespace, State string
	States           []string
	Rows             []stackRow
	Total, Shown     int
}

type stackRow struct {
	Namespace, Name, Health, Message, Source, LastState, Commit string
	LastTime                                                    any
}

// stackStates are the states the Stacks list filters by.
var stackStates = []string{"Healthy", "Progressing", "Degraded"}

func (s *Server) stacksPage(r *http.Request, sess *session) (string, any, error) {
	ctx := r.Context()
	var list pulumiv1.StackList
	if err := s.listIn(ctx, &list, ""); err != nil {
		return "", nil, err
	}
	var namespaces []string
	for _, st := range list.Items {
		namespaces = append(namespaces, st.Namespace)
	}
	allowed, err := s.readable(ctx, sess, stacksKind, namespaces)
	if err != nil {
		return "", nil, err
	}
	q := r.URL.Query()
	v := stacksView{Namespaces: allowed, Namespace: q.Get("namespace"), State: q.Get("state"), States: stackStates}
	for i := range list.Items {
		st := &list.Items[i]
		if _, ok := slices.BinarySearch(allowed, st.Namespace); !ok {
			continue
		}
		v.Total++
		row := buildStackRow(st)
		if (v.Namespace != "" && st.Namespace != v.Namespace) || (v.State != "" && row.Health != v.State) {
			continue
		}
		v.Rows = append(v.Rows, row)
	}
	slices.SortFunc(v.Rows, func(a, b stackRow) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	v.Shown = len(v.Rows)
	return "Stacks", v, nil
}

func buildStackRow(st *pulumiv1.Stack) stackRow {
	h := change.Health([]promotionv1alpha1.StackBinding{{Name: st.Name}}, map[string]*pulumiv1.Stack{st.Name: st})
	row := stackRow{Namespace: st.Namespace, Name: st.Name, Health: string(h.Status), Message: strings.TrimPrefix(h.Message, "Stack "+st.Name+": ")}
	row.Source = stackSource(&st.Spec)
	if lu := st.Status.LastUpdate; lu != nil {
		row.LastState, row.LastTime = string(lu.State), lu.LastResyncTime
		row.Commit = cmp.Or(lu.LastSuccessfulCommit, lu.LastAttemptedCommit)
	}
	return row
}

// stackSource says where a Stack's program comes from.
func stackSource(spec *shared.StackSpec) string {
	switch {
	case spec.GitSource != nil && spec.ProjectRepo != "":
		ref := cmp.Or(spec.Branch, change.ShortCommit(spec.Commit))
		return spec.ProjectRepo + " @ " + ref
	case spec.ProgramRef != nil:
		return "Program " + spec.ProgramRef.Name
	case spec.FluxSource != nil:
		return spec.FluxSource.SourceRef.Kind + " " + spec.FluxSource.SourceRef.Name
	}
	return ""
}

// stackDetail is one Stack in full.
type stackDetail struct {
	stackRow
	Stack    string
	Conds    []metav1.Condition
	Last     *shared.StackUpdateState
	Outputs  []output
	History  []shared.UpdateRecord
	Updates  []updateView
	Drift    *shared.DriftCheck
	Resource string
}

// output is a stack output; a secret one shows as "[secret]", as the
// Stack's status holds it.
type output struct{ Name, Value string }

func (s *Server) stackPage(r *http.Request, sess *session) (string, any, error) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := s.mayRead(ctx, sess, stacksKind, ns); err != nil {
		return "", nil, err
	}
	var st pulumiv1.Stack
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, notFound("stack %s/%s not found", ns, name)
		}
		return "", nil, err
	}
	d := stackDetail{
		stackRow: buildStackRow(&st), Stack: st.Spec.Stack, Conds: st.Status.Conditions, Last: st.Status.LastUpdate,
		History: st.Status.History, Drift: st.Status.LastDriftCheck,
	}
	d.Outputs = outputsOf(&st, 0)
	if ok, err := s.mayList(ctx, sess, updatesKind, ns); err != nil {
		return "", nil, err
	} else if ok {
		var ups autov1alpha1.UpdateList
		if err := s.listIn(ctx, &ups, ns); err != nil {
			return "", nil, err
		}
		for i := range ups.Items {
			if metav1.IsControlledBy(&ups.Items[i], &st) {
				d.Updates = append(d.Updates, buildUpdate(&ups.Items[i]))
			}
		}
		slices.SortFunc(d.Updates, func(a, b updateView) int { return timeOf(b.Start).Compare(timeOf(a.Start)) })
	}
	return "Stack " + name, d, nil
}

// updateDetail is one Update in full: what the permalinks of self-managed
// backends lead to.
type updateDetail struct {
	updateView
	Stack     string
	Resources []autov1alpha1.ResourceChange
}

func (s *Server) updatePage(r *http.Request, sess *session) (string, any, error) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := s.mayRead(ctx, sess, updatesKind, ns); err != nil {
		return "", nil, err
	}
	var u autov1alpha1.Update
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &u); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, notFound("update %s/%s not found (finished Updates are deleted after their ttlAfterCompleted; the Stack's history keeps their outcome)", ns, name)
		}
		return "", nil, err
	}
	d := updateDetail{updateView: buildUpdate(&u), Stack: u.Spec.StackName, Resources: u.Status.ResourceChanges}
	if owner := metav1.GetControllerOf(&u); owner != nil && owner.Kind == "Stack" {
		d.Stack = owner.Name
	}
	return "Update " + name, d, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// auditView is the audit trail, filtered.
type auditView struct {
	Namespaces                              []string
	Namespace, Pipeline, Stage, Event, Text string
	Events                                  []string
	Entries                                 []auditEntry
}

type auditEntry struct {
	Namespace string
	pipelinectl.HistoryEntry
}

// audit returns the filtered audit trail, newest first, of the namespaces
// where the user may list promotions.
func (s *Server) audit(r *http.Request, sess *session) (auditView, error) {
	ctx := r.Context()
	q := r.URL.Query()
	v := auditView{
		Namespace: q.Get("namespace"), Pipeline: q.Get("pipeline"), Stage: q.Get("stage"), Event: q.Get("event"),
		Text: q.Get("q"), Events: change.AuditEvents,
	}
	_, allowed, err := s.pipelineNamespaces(ctx, sess, promotionsKind, "")
	if err != nil {
		return v, err
	}
	v.Namespaces = allowed
	text := strings.ToLower(v.Text)
	for _, ns := range allowed {
		if v.Namespace != "" && ns != v.Namespace {
			continue
		}
		c := &pipelinectl.Client{Client: s.reader, Namespace: ns, Now: s.clock}
		entries, err := c.History(ctx, v.Stage)
		if err != nil {
			return v, err
		}
		for _, e := range entries {
			if (v.Pipeline != "" && e.Pipeline != v.Pipeline) || (v.Event != "" && e.Event != v.Event) {
				continue
			}
			if text != "" && !strings.Contains(strings.ToLower(strings.Join([]string{e.Release, e.Commit, e.Promotion, e.By, e.Message, e.Stage, e.Pipeline}, " ")), text) {
				continue
			}
			v.Entries = append(v.Entries, auditEntry{Namespace: ns, HistoryEntry: e})
		}
	}
	slices.SortStableFunc(v.Entries, func(a, b auditEntry) int { return b.Time.Compare(a.Time.Time) })
	return v, nil
}

func (s *Server) auditPage(r *http.Request, sess *session) (string, any, error) {
	v, err := s.audit(r, sess)
	return "Audit", v, err
}

// auditJSON exports the filtered audit trail in the CLI's versioned shape
// (`stackyard pipeline history -o json`), with the namespace of each entry.
func (s *Server) auditJSON(w http.ResponseWriter, r *http.Request) {
	sess, err := s.identify(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.audit(r, sess)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	type entry struct {
		Namespace string `json:"namespace"`
		pipelinectl.HistoryEntry
	}
	list := pipelinectl.List[entry]{APIVersion: pipelinectl.OutputAPIVersion, Kind: "History", Items: []entry{}}
	for _, e := range v.Entries {
		list.Items = append(list.Items, entry(e))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="stackyard-audit.json"`)
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(list)
}
