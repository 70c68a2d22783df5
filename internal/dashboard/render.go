package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/authn"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// fragmentHeader asks for a page's content only, without the layout: what a
// page fetches to update itself live.
const fragmentHeader = "X-Stackyard-Fragment"

// pageNames are the templates of assets/templates besides the layout.
var pageNames = []string{"pipelines", "pipeline", "promotion", "stacks", "stack", "update", "audit", "login", "error"}

// pageData is what every page's template gets.
type pageData struct {
	// Title is the page's title.
	Title string
	// Nav is the menu entry to highlight.
	Nav string
	// User is the signed-in user's name ("" on the sign-in page).
	User string
	// CSRF is the session's CSRF token, for the action forms.
	CSRF string
	// ReadOnly hides the action forms.
	ReadOnly bool
	// Boot identifies this server's run, so a page notices a restart.
	Boot string
	// Path is the page's own path and query, where actions return.
	Path string
	// Notice is the outcome of the action that led here.
	Notice string
	// Data is the page's own view.
	Data any
}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", "assets/templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"short": change.ShortCommit,
	"ago": func(t any) string {
		tm := timeOf(t)
		if tm.IsZero() {
			return "—"
		}
		return duration.HumanDuration(time.Since(tm)) + " ago"
	},
	"left": func(t any) string {
		tm := timeOf(t)
		if tm.IsZero() {
			return "—"
		}
		if d := time.Until(tm); d > 0 {
			return duration.HumanDuration(d) + " left"
		}
		return "ran out"
	},
	"when": func(t any) string {
		tm := timeOf(t)
		if tm.IsZero() {
			return ""
		}
		return tm.UTC().Format(time.RFC3339)
	},
	"oneline":  func(s string) string { first, _, _ := strings.Cut(s, "\n"); return first },
	"lower":    strings.ToLower,
	"join":     strings.Join,
	"trunc":    truncate,
	"symbol":   healthSymbol,
	"opSign":   valuediff.OpSign,
	"kindSign": kindSign,
	"patch":    patchLines,
	"ruleNeeds": func(r promotionv1alpha1.PolicyResult) string {
		return approvalsFrom(r.Required, r.From, r.RequireEach)
	},
	"more": func(total int32, shown int) int { return max(int(total)-shown, 0) },
}

// kindSign is a property change's sign: + added, − removed, ~ changed.
func kindSign(kind string) string {
	switch kind {
	case valuediff.KindAdd:
		return "+"
	case valuediff.KindDelete:
		return "−"
	}
	return "~"
}

// patchLine is one line of a unified diff and its class: add, del, hunk,
// file, or "" for context.
type patchLine struct{ Class, Text string }

// patchLines splits a unified diff into lines classed for colour; each
// line keeps its own +, - or space, which carry the meaning without it.
func patchLines(patch string) []patchLine {
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	out := make([]patchLine, 0, len(lines))
	for _, l := range lines {
		class := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "), strings.HasPrefix(l, "index "):
			class = "file"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		}
		out = append(out, patchLine{Class: class, Text: l})
	}
	return out
}

// healthSymbol is a health's sign, shown beside its colour so that health
// does not rest on hue alone.
func healthSymbol(health string) string {
	switch health {
	case "Healthy":
		return "✓"
	case "Progressing":
		return "↻"
	case "Degraded":
		return "✗"
	}
	return "?"
}

// truncate shortens s to n characters, with an ellipsis when it cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}

func timeOf(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case metav1.Time:
		return t.Time
	case *metav1.Time:
		if t != nil {
			return t.Time
		}
	}
	return time.Time{}
}

// viewFunc builds a page's view for a signed-in user: its title and data.
type viewFunc func(r *http.Request, sess *session) (string, any, error)

// page serves a view: the whole page, or its content only when the page
// fetches itself live. A visitor who is not signed in is sent to the
// sign-in page, and comes back after.
func (s *Server) page(name, nav string, view viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.identify(r)
		if err != nil {
			var ae *authn.Error
			if errors.As(err, &ae) && ae.Code == http.StatusUnauthorized && r.Header.Get(fragmentHeader) == "" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.fail(w, r, err)
			return
		}
		title, data, err := view(r, sess)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, name, pageData{
			Title: title, Nav: nav, User: sess.user.Username, CSRF: sess.csrf, ReadOnly: s.readOnly,
			Path: r.URL.RequestURI(), Notice: r.URL.Query().Get("notice"), Data: data,
		})
	}
}

// render executes a page's template into a buffer first, so that a
// template error never sends half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, data pageData) {
	data.Boot = s.boot
	tmpl := "layout"
	if r.Header.Get(fragmentHeader) != "" {
		tmpl = "content"
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, tmpl, data); err != nil {
		s.log.Error(err, "Could not render a dashboard page", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail answers a request that cannot be served: the message of an
// authn.Error (or an API error the user can act on) with its code, or a
// bare 500 whose detail goes to the log only.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := errorAnswer(err)
	var ae *authn.Error
	if errors.As(err, &ae) && ae.Detail != "" {
		// The detail (redacted at its source) is for the log only.
		err = fmt.Errorf("%w: %s", err, ae.Detail)
	}
	if code >= http.StatusInternalServerError {
		s.log.Error(err, "Could not answer a dashboard request", "path", r.URL.Path)
	} else {
		s.log.V(1).Info("Refused a dashboard request", "path", r.URL.Path, "code", code, "reason", err.Error())
	}
	if r.Header.Get(fragmentHeader) != "" || strings.HasSuffix(r.URL.Path, ".json") || r.URL.Path == "/events" {
		http.Error(w, msg, code)
		return
	}
	s.render(w, r, code, "error", pageData{Title: http.StatusText(code), ReadOnly: true, Data: msg})
}

// errorAnswer maps an error to what the user is told.
func errorAnswer(err error) (int, string) {
	var ae *authn.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.Message
	}
	var ue *userError
	if errors.As(err, &ue) {
		return ue.code, ue.Error()
	}
	return http.StatusInternalServerError, "internal error; the operator log has the detail"
}

// userError is a refusal the user can act on: not found, forbidden, an
// action the API server or the CLI logic refused.
type userError struct {
	code int
	err  error
}

func (e *userError) Error() string { return e.err.Error() }
func (e *userError) Unwrap() error { return e.err }

func notFound(format string, args ...any) error {
	return &userError{code: http.StatusNotFound, err: fmt.Errorf(format, args...)}
}
