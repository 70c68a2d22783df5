package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/authn"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// maxForm bounds an action's form.
const maxForm = 64 << 10

// act runs an action as the signed-in user and sends the browser back to
// the page it came from (or to the promotion it created), with a notice.
// The user's own token goes to the API server, so RBAC and the admission
// policies (who may approve, request or govern) judge the action exactly
// as they judge kubectl.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	sess, err := s.identify(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkAction(r, sess); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.readOnly {
		s.fail(w, r, &authn.Error{Code: http.StatusForbidden, Message: "the dashboard is read-only: act with kubectl or the stackyard CLI"})
		return
	}
	ns := r.PostFormValue("namespace")
	if ns == "" {
		s.fail(w, r, &userError{code: http.StatusBadRequest, err: errors.New("namespace: required")})
		return
	}
	c, err := s.userClient(sess, ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	next, notice, err := s.runAction(r.Context(), c, r.PathValue("action"), r)
	if err != nil {
		s.fail(w, r, actionError(err))
		return
	}
	if next == "" {
		next = localPath(r.PostFormValue("return"))
	}
	sep := "?"
	if strings.Contains(next, "?") {
		sep = "&"
	}
	http.Redirect(w, r, next+sep+"notice="+url.QueryEscape(notice), http.StatusSeeOther)
}

// runAction does one action; it returns where to go next ("" for back)
// and what to tell the user.
func (s *Server) runAction(ctx context.Context, c *pipelinectl.Client, action string, r *http.Request) (string, string, error) {
	field := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	required := func(name string) (string, error) {
		if v := field(name); v != "" {
			return v, nil
		}
		return "", &userError{code: http.StatusBadRequest, err: fmt.Errorf("%s: required", name)}
	}
	switch action {
	case "approve", "reject":
		promotion, err := required("promotion")
		if err != nil {
			return "", "", err
		}
		reject := action == "reject"
		if reject && field("comment") == "" {
			return "", "", &userError{code: http.StatusBadRequest, err: errors.New("comment: a rejection needs a reason")}
		}
		var wave int32
		if w := field("wave"); w != "" {
			n, err := strconv.ParseInt(w, 10, 32)
			if err != nil || n < 2 {
				return "", "", &userError{code: http.StatusBadRequest, err: fmt.Errorf("wave: %q is not a wave after the first", w)}
			}
			wave = int32(n)
		}
		a, err := c.Decide(ctx, pipelinectl.Decision{Promotion: promotion, Reject: reject, Comment: field("comment"), Wave: wave})
		if err != nil {
			return "", "", err
		}
		verb := "approved"
		if reject {
			verb = "rejected"
		}
		if a.Spec.Wave != 0 {
			return "", fmt.Sprintf("%s wave %d of promotion %s", verb, a.Spec.Wave, promotion), nil
		}
		return "", fmt.Sprintf("%s promotion %s", verb, promotion), nil
	case "halt", "resume", "abort":
		promotion, err := required("promotion")
		if err != nil {
			return "", "", err
		}
		action := map[string]promotionv1alpha1.InterventionAction{
			"halt": promotionv1alpha1.Halt, "resume": promotionv1alpha1.Resume, "abort": promotionv1alpha1.Abort,
		}[action]
		if _, err := c.Intervene(ctx, promotion, action, field("reason")); err != nil {
			return "", "", err
		}
		return "", fmt.Sprintf("asked promotion %s to %s", promotion, strings.ToLower(string(action))), nil
	case "promote", "rollback":
		stage, err := required("stage")
		if err != nil {
			return "", "", err
		}
		p, err := c.Promote(ctx, pipelinectl.Request{Stage: stage, Release: field("release"), Rollback: action == "rollback", Reason: field("reason")})
		if err != nil {
			return "", "", err
		}
		return "/promotions/" + p.Namespace + "/" + p.Name, fmt.Sprintf("requested %s %s of release %s into %s", action, p.Name, p.Spec.Release, stage), nil
	case "reconcile":
		// A Stack runs its update again; a Pipeline looks for new
		// releases at once.
		var obj client.Object = &pulumiv1.Stack{}
		name, what := field("stack"), "Stack"
		if p := field("pipeline"); p != "" {
			obj, name, what = &promotionv1alpha1.Pipeline{}, p, "Pipeline"
		}
		if name == "" {
			return "", "", &userError{code: http.StatusBadRequest, err: errors.New("stack or pipeline: required")}
		}
		value := s.now().UTC().Format(time.RFC3339Nano)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, shared.ReconcileRequestAnnotation, value)
		obj.SetNamespace(c.Namespace)
		obj.SetName(name)
		if err := c.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return "", "", err
		}
		return "", "asked " + what + " " + name + " to reconcile", nil
	}
	return "", "", &userError{code: http.StatusNotFound, err: fmt.Errorf("no action %q", action)}
}

// userClient is a client that acts as the session's user: the API
// server's address and CA, the user's token, none of the operator's
// credentials.
func (s *Server) userClient(sess *session, ns string) (*pipelinectl.Client, error) {
	if s.restConfig == nil {
		return nil, &authn.Error{Code: http.StatusServiceUnavailable, Message: "the dashboard cannot reach the API server for actions"}
	}
	cfg := rest.AnonymousClientConfig(s.restConfig)
	cfg.BearerToken = sess.token
	c, err := pipelinectl.New(cfg, ns)
	if err != nil {
		return nil, err
	}
	c.Now = s.clock
	return c, nil
}

// actionError keeps what the user can act on: the API server's refusal
// (forbidden, invalid, an admission policy's message) with its code, and
// the CLI logic's refusals (nothing to approve yet, no release to
// promote) as a conflict.
func actionError(err error) error {
	var ue *userError
	var ae *authn.Error
	if errors.As(err, &ue) || errors.As(err, &ae) {
		return err
	}
	if status, ok := err.(apierrors.APIStatus); ok || errors.As(err, &status) {
		if code := int(status.Status().Code); code >= 400 && code < 500 {
			return &userError{code: code, err: err}
		}
		return err
	}
	return &userError{code: http.StatusConflict, err: err}
}

// localPath is p when it is a path of this site, else "/": an action
// never redirects elsewhere.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	// Checked on the raw and the decoded path alike: "/%2Fhost" decodes to
	// "//host", and browsers read a backslash as a slash and drop tabs and
	// newlines.
	for _, path := range []string{p, u.Path} {
		if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") ||
			strings.ContainsFunc(path, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }) {
			return "/"
		}
	}
	q := u.Query()
	q.Del("notice")
	if enc := q.Encode(); enc != "" {
		return u.EscapedPath() + "?" + enc
	}
	return u.EscapedPath()
}

// serveLogin shows the sign-in form, or sends a signed-in user on.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if _, err := s.identify(r); err == nil {
		http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // localPath keeps next a path of this site
		return
	}
	s.render(w, r, http.StatusOK, "login", pageData{Title: "Sign in", ReadOnly: true, Data: loginView{Next: next}})
}

type loginView struct{ Next, Error string }

// login checks the token pasted in the form and keeps it in the session
// cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := checkOrigin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	next := localPath(r.PostFormValue("next"))
	token, err := authn.CheckToken(r.PostFormValue("token"))
	if err != nil {
		err = authn.Unauthorized(err.Error())
	} else {
		_, err = s.authenticate(r.Context(), token)
	}
	if err != nil {
		code, msg := errorAnswer(err)
		if code == http.StatusUnauthorized {
			msg = "the API server does not accept this token"
		}
		s.render(w, r, code, "login", pageData{Title: "Sign in", ReadOnly: true, Data: loginView{Next: next, Error: msg}})
		return
	}
	setSessionCookie(w, r, token)
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // localPath keeps next a path of this site
}

// logout forgets the session cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := checkOrigin(r); err != nil {
		s.fail(w, r, err)
		return
	}
	clearSessionCookie(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
