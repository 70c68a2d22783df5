package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/forge"
	"github.com/stackyard/stackyard/internal/receiver"
	"github.com/stackyard/stackyard/internal/redact"
	"github.com/stackyard/stackyard/internal/verify"
)

// DefaultTimeout bounds one request to a Provider.
const DefaultTimeout = 10 * time.Second

// maxAnswer is how much of a refusal's body is quoted in the error.
const maxAnswer = 256

// Default API addresses of the forges that have one.
const (
	GitHubAPI = "https://api.github.com"
	GitLabAPI = "https://gitlab.com/api/v4"
)

// Target is a Provider with its Secret read: where and how to send.
type Target struct {
	// Type is the Provider's spec.type.
	Type notificationv1alpha1.ProviderType
	// Address is the URL (webhook, slack, teams) or the API base URL
	// (gitea, github, gitlab).
	Address string
	// Token is the webhook's HMAC key or the forge's API token.
	Token string
	// AddressFromSecret says the address came from the Secret: errors
	// then never show it.
	AddressFromSecret bool
}

// Supports reports whether the Provider type sends events of type et:
// the commit-status providers take the promotion events only.
func Supports(t notificationv1alpha1.ProviderType, et notificationv1alpha1.EventType) bool {
	switch t {
	case notificationv1alpha1.ProviderGitea, notificationv1alpha1.ProviderGitHub, notificationv1alpha1.ProviderGitLab:
		_, ok := commitStates[et]
		return ok
	default:
		return true
	}
}

// commitStates maps the promotion events to GitHub's and Gitea's commit
// states.
var commitStates = map[notificationv1alpha1.EventType]string{
	notificationv1alpha1.EventPromotionAwaitingApproval: "pending",
	notificationv1alpha1.EventPromotionSucceeded:        "success",
	notificationv1alpha1.EventRolledBack:                "success",
	notificationv1alpha1.EventPromotionFailed:           "failure",
	notificationv1alpha1.EventVerificationFailed:        "failure",
}

// Sender sends events to Providers.
type Sender struct {
	// Client makes the requests; verify.NewHTTPClient(false) when nil.
	Client *http.Client
	// Timeout bounds each request; DefaultTimeout when zero.
	Timeout time.Duration
}

// NewSender returns a Sender whose client refuses link-local and cloud
// metadata addresses and redirects to other hosts.
func NewSender() *Sender {
	return &Sender{Client: verify.NewHTTPClient(false), Timeout: DefaultTimeout}
}

// Send delivers e to t. The error names what went wrong without the token,
// and without the address when it came from a Secret.
func (s *Sender) Send(ctx context.Context, t Target, e *Event) error {
	req, err := Request(t, e)
	if err != nil {
		return err
	}
	return s.do(ctx, t, req)
}

// Validate checks the target's address: an absolute http or https URL.
// where names the address's origin in the error.
func Validate(address, where string) error {
	if address == "" {
		return fmt.Errorf("%s: no address", where)
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: must be an http:// or https:// URL", where)
	}
	return nil
}

// Request builds the request that delivers e to t, without sending it.
func Request(t Target, e *Event) (*http.Request, error) {
	var (
		target = t.Address
		body   any
		header = http.Header{}
	)
	switch t.Type {
	case notificationv1alpha1.ProviderWebhook:
		body = e
	case notificationv1alpha1.ProviderSlack:
		body = slackMessage(e)
	case notificationv1alpha1.ProviderTeams:
		body = teamsCard(e)
	case notificationv1alpha1.ProviderGitea, notificationv1alpha1.ProviderGitHub, notificationv1alpha1.ProviderGitLab:
		var err error
		target, body, err = commitStatus(t, e, header)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("spec.type: unknown provider type %q", t.Type)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s payload: %w", t.Type, err)
	}
	if t.Type == notificationv1alpha1.ProviderWebhook && t.Token != "" {
		header.Set("X-Signature", "sha256="+Sign(data, t.Token))
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(data))
	if err != nil {
		return nil, errors.New("building the request: the address is not a valid URL")
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stackyard-notification")
	return req, nil
}

// Sign returns the hex HMAC-SHA256 of body with token, as a webhook
// Provider sends it in X-Signature after "sha256=" (the same signature a
// generic Receiver checks).
func Sign(body []byte, token string) string { return receiver.Sign(body, token) }

// slackMessage is a Slack incoming-webhook message: {"text": …}, in
// Slack's mrkdwn, which Mattermost and Rocket.Chat read too.
func slackMessage(e *Event) map[string]any {
	return map[string]any{"text": "*" + e.Title() + "*\n" + strings.Join(e.Lines(), "\n")}
}

// teamsCard is a Microsoft Teams incoming-webhook MessageCard.
func teamsCard(e *Event) map[string]any {
	return map[string]any{
		"@type":    "MessageCard",
		"@context": "https://schema.org/extensions",
		"summary":  e.Title(),
		"title":    e.Title(),
		"text":     strings.Join(e.Lines(), "\n\n"),
	}
}

// StatusContext is the context (GitLab: name) of the commit status of a
// promotion into stage.
func StatusContext(stage string) string { return "stackyard/" + stage }

// commitStatus returns the address and body of the commit status for e,
// and sets the token header, as internal/forge speaks to the forge.
func commitStatus(t Target, e *Event, header http.Header) (string, any, error) {
	state, ok := commitStates[notificationv1alpha1.EventType(e.Type)]
	if !ok {
		return "", nil, fmt.Errorf("event %s has no commit status", e.Type)
	}
	if e.Commit == "" {
		return "", nil, fmt.Errorf("event %s has no commit", e.Key)
	}
	path, err := forge.RepoPath(e.RepoURL)
	if err != nil {
		return "", nil, fmt.Errorf("the pipeline's repository: %w", err)
	}
	f := promotionv1alpha1.Forge(t.Type)
	desc := e.Title()
	if e.Message != "" {
		desc += ": " + e.Message
	}
	target, body, err := forge.StatusRequest(f, t.Address, path, e.Commit, forge.Status{
		State: state, Context: StatusContext(e.Stage), Description: desc, TargetURL: e.URL,
	})
	if err != nil {
		return "", nil, err
	}
	forge.Authorize(f, header, t.Token)
	return target, body, nil
}

// do sends req and reads the answer: anything but 2xx is an error.
func (s *Sender) do(ctx context.Context, t Target, req *http.Request) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := s.Client
	if client == nil {
		client = verify.NewHTTPClient(false)
	}
	secrets := redact.New(t.Token)
	where := "the provider's address"
	if t.AddressFromSecret {
		secrets.Add(t.Address)
		if u, err := url.Parse(t.Address); err == nil {
			secrets.Add(u.Host, u.Hostname())
		}
		where = "the address of the provider's Secret"
	} else if u, err := url.Parse(t.Address); err == nil {
		where = u.Scheme + "://" + u.Host
	}
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("sending to %s: %s", where, secrets.Redact(err.Error()))
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("%s answered %d %s", where, resp.StatusCode, http.StatusText(resp.StatusCode))
		if a := strings.TrimSpace(string(answer)); a != "" {
			msg += ": " + secrets.Redact(a)
		}
		return errors.New(msg)
	}
	return nil
}
