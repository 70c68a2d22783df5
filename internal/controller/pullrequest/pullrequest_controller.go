package pullrequest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/forge"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Event reasons on a Pipeline.
const (
	// EventForgeFailed: the forge could not be asked for pull requests,
	// or refused a comment or a status.
	EventForgeFailed = "PullRequestForgeFailed"
	// EventPreviewed: a pull request's head was previewed and posted.
	EventPreviewed = "PullRequestPreviewed"
)

// Reasons of the errors a reconcile ends with (logged and retried: the
// Pipeline's conditions belong to the Pipeline controller; what a person
// must fix is in status.pullRequests.error and events).
const (
	reasonForge   = "ForgeFailed"
	reasonSecret  = "SecretMissing"
	reasonPending = "Previewing"
)

// DefaultInterval is how often the forge is asked for open pull requests
// when spec.pullRequests.interval is not set.
const DefaultInterval = 2 * time.Minute

// minCheck is the least time between two questions to the forge for one
// Pipeline, however often it is woken: a burst of webhooks makes one.
const minCheck = 10 * time.Second

// previewWait is how long a Pipeline whose previews run waits before it
// looks by itself; its Workspaces' and Updates' changes wake it sooner.
const previewWait = 30 * time.Second

// Reconciler previews the open pull requests of Pipelines:
//
//	reconcileForge → reconcileClosed → reconcileReviewStacks →
//	reconcilePreviews → reconcilePosts
type Reconciler struct {
	// Client reads Pipelines, Stages and Stacks, and writes the preview
	// Workspaces and Updates and the Pipelines' status.pullRequests.
	Client client.Client
	// APIReader reads the forge token's Secret (never cached).
	APIReader client.Reader
	// Recorder emits events on Pipelines.
	Recorder events.EventRecorder
	// HTTP makes the forge's calls; nil: a client that refuses
	// link-local and metadata addresses and redirects to other hosts.
	HTTP *http.Client
	// DashboardURL, when set, is linked from comments and statuses.
	DashboardURL string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// session is one reconcile of one Pipeline.
type session struct {
	r   *Reconciler
	p   *promotionv1alpha1.Pipeline
	now time.Time
	// forge is the forge's client and open its open pull requests into
	// the Pipeline's branch, oldest first, once reconcileForge has them.
	forge *forge.Client
	open  []forge.PullRequest
	// listed says open was read now (not skipped by minCheck).
	listed bool
	// stale says the Pipeline in hand was found older than the one
	// stored (checkCurrent, stackrun.Preview.MakerStale): the reconcile
	// writes nothing. current says it was found to be the one stored.
	stale, current bool
}

// staleRecheck is how soon a reconcile that found its Pipeline older than
// the one stored looks again, with the cache caught up.
const staleRecheck = 100 * time.Millisecond

// Reconcile previews one Pipeline's open pull requests.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	p := &promotionv1alpha1.Pipeline{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		// Kubernetes' garbage collector deletes what the Pipeline owns.
		return ctrl.Result{}, nil
	}
	s := &session{r: r, p: p, now: time.Now()}
	if r.Now != nil {
		s.now = r.Now()
	}
	// Locked: the status records what this controller made (the review
	// stacks' UIDs); a patch from a copy older than the one stored, which
	// replaces the whole list of pull requests, would lose them.
	patcher := sreconcile.NewPatcher(r.Client, p).Locked()
	var (
		res sreconcile.Result
		err error
	)
	defer func() {
		if s.stale {
			// Its status is older than the stored one (stackrun.Preview
			// found so): a patch from it would put older records back.
			result, retErr = ctrl.Result{RequeueAfter: staleRecheck}, nil
			return
		}
		// What went wrong is for the Pipeline's users to see; a wait is
		// not wrong.
		var waiting *sreconcile.Waiting
		if st := p.Status.PullRequests; st != nil && err != nil && !errors.As(err, &waiting) {
			st.Error = sreconcile.Truncate(err.Error(), 1024)
		}
		if perr := patcher.Patch(ctx, p); perr != nil {
			err = errors.Join(err, perr)
		}
		result, retErr = s.result(ctx, res, err)
	}()
	if p.Spec.PullRequests == nil {
		if p.Status.PullRequests != nil {
			err = s.dropClosedReviewStacks(ctx, nil)
			if err == nil {
				err = s.deletePreviews(ctx, func(int64, string) bool { return false })
			}
			if err == nil {
				p.Status.PullRequests = nil
			}
		}
		return
	}
	if p.Status.PullRequests == nil {
		p.Status.PullRequests = &promotionv1alpha1.PullRequestPreviewsStatus{}
	}
	res, err = sreconcile.Steps{
		{Name: "reconcileForge", Run: s.reconcileForge},
		{Name: "reconcileClosed", Run: s.reconcileClosed},
		{Name: "reconcileReviewStacks", Run: s.reconcileReviewStacks},
		{Name: "reconcilePreviews", Run: s.reconcilePreviews},
		{Name: "reconcilePosts", Run: s.reconcilePosts},
	}.Run(ctx)
	return
}

// result maps the outcome to when to look again: soon while previews run
// (their changes wake it sooner), at minCheck's end when the forge was not
// asked, else every interval; errors with backoff.
func (s *session) result(ctx context.Context, res sreconcile.Result, err error) (ctrl.Result, error) {
	if err != nil {
		log.FromContext(ctx).Info("pull-request previews: " + err.Error())
	}
	spec := s.p.Spec.PullRequests
	if spec == nil {
		return sreconcile.ComputeResult(res, err, sreconcile.Schedule{})
	}
	interval := DefaultInterval
	if spec.Interval != nil && spec.Interval.Duration > 0 {
		interval = max(spec.Interval.Duration, minCheck)
	}
	if err == nil && !s.listed && s.p.Status.PullRequests.LastCheckTime != nil {
		// Woken within minCheck of the last question: ask at its end.
		err = sreconcile.NewWaiting(reasonPending, errors.New("asking the forge again shortly"),
			max(s.p.Status.PullRequests.LastCheckTime.Add(minCheck).Sub(s.now), time.Second))
	}
	if err == nil && slices.ContainsFunc(s.p.Status.PullRequests.PullRequests, func(pr promotionv1alpha1.PullRequestStatus) bool {
		return pr.Phase == promotionv1alpha1.PullRequestPreviewing
	}) {
		err = sreconcile.NewWaiting(reasonPending, errors.New("previews run"), previewWait)
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{Interval: interval})
}

// reconcileForge asks the forge for the open pull requests into the
// Pipeline's branch, unless it was asked less than minCheck ago (the
// pull requests known from status then stand for the open ones).
func (s *session) reconcileForge(ctx context.Context) (sreconcile.Result, error) {
	spec := s.p.Spec.PullRequests
	st := s.p.Status.PullRequests
	token, err := s.token(ctx)
	if err != nil {
		st.Error = err.Error()
		return sreconcile.ResultEmpty, err
	}
	c, err := forge.New(spec.Forge, spec.APIURL, token, s.p.Spec.Git.RepoURL)
	if err != nil {
		st.Error = "spec.pullRequests: " + err.Error()
		return sreconcile.ResultEmpty, sreconcile.NewStalling(reasonForge, errors.New(st.Error))
	}
	c.HTTP = s.r.HTTP
	s.forge = c
	if st.LastCheckTime != nil && s.now.Sub(st.LastCheckTime.Time) < minCheck && st.Error == "" {
		for _, pr := range st.PullRequests {
			s.open = append(s.open, forge.PullRequest{Number: pr.Number, Head: pr.Head, Fork: pr.Fork})
		}
		return sreconcile.ResultEmpty, nil
	}
	open, err := c.OpenPullRequests(ctx, s.p.Spec.Git.Branch)
	if err != nil {
		st.Error = sreconcile.Truncate("asking "+string(spec.Forge)+" for open pull requests: "+err.Error(), 1024)
		s.event(corev1.EventTypeWarning, EventForgeFailed, st.Error)
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(reasonForge, errors.New(st.Error))
	}
	slices.SortFunc(open, func(a, b forge.PullRequest) int { return cmp.Compare(a.Number, b.Number) })
	s.open, s.listed = open, true
	st.Error, st.LastCheckTime = "", &metav1.Time{Time: s.now}
	return sreconcile.ResultEmpty, nil
}

// token reads the forge's API token from spec.pullRequests.secretRef.
func (s *session) token(ctx context.Context) (string, error) {
	name := s.p.Spec.PullRequests.SecretRef.Name
	var secret corev1.Secret
	err := s.r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return "", sreconcile.NewMissing(reasonSecret, fmt.Errorf("spec.pullRequests.secretRef: Secret %q not found", name))
	case err != nil:
		return "", sreconcile.NewGeneric(reasonSecret, fmt.Errorf("spec.pullRequests.secretRef: reading Secret %q: %w", name, err))
	}
	token := string(secret.Data[promotionv1alpha1.ForgeTokenKey])
	if token == "" {
		return "", sreconcile.NewStalling(reasonSecret, fmt.Errorf("spec.pullRequests.secretRef: Secret %q has no key %q", name, promotionv1alpha1.ForgeTokenKey))
	}
	return token, nil
}

// reconcileClosed deletes the review stacks of the pull requests no
// longer open, forgets those pull requests, and deletes every preview
// that is not of an open pull request's current head.
func (s *session) reconcileClosed(ctx context.Context) (sreconcile.Result, error) {
	heads := map[int64]string{}
	for _, pr := range s.open {
		heads[pr.Number] = pr.Head
	}
	if err := s.dropClosedReviewStacks(ctx, heads); err != nil {
		return sreconcile.ResultEmpty, err
	}
	st := s.p.Status.PullRequests
	st.PullRequests = slices.DeleteFunc(st.PullRequests, func(pr promotionv1alpha1.PullRequestStatus) bool {
		_, open := heads[pr.Number]
		return !open
	})
	return sreconcile.ResultEmpty, s.deletePreviews(ctx, func(number int64, head string) bool { return heads[number] == head })
}

// event records an event on the Pipeline.
func (s *session) event(eventType, reason, note string) {
	if s.r.Recorder != nil {
		s.r.Recorder.Eventf(s.p, nil, eventType, reason, "PullRequestPreview", "%s", note)
	}
}

// entry returns the status of pull request number, adding it when new;
// the list stays sorted by number. The pointer is good until the next
// entry.
func (s *session) entry(number int64) *promotionv1alpha1.PullRequestStatus {
	st := s.p.Status.PullRequests
	i, found := slices.BinarySearchFunc(st.PullRequests, number, func(pr promotionv1alpha1.PullRequestStatus, n int64) int {
		return cmp.Compare(pr.Number, n)
	})
	if !found {
		st.PullRequests = slices.Insert(st.PullRequests, i, promotionv1alpha1.PullRequestStatus{Number: number})
	}
	return &st.PullRequests[i]
}

// numberLabel is the value of PullRequestLabel for number.
func numberLabel(number int64) string { return strconv.FormatInt(number, 10) }
