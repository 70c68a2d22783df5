package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ServeWebhooks serves the admission webhooks of Options.Webhooks on the
// address and with the certificate envtest gave them, with the handlers
// register adds (by path), until ctx ends. It returns once the server
// answers, so that the API server's first call does not fail the write
// (the webhooks fail closed).
func (e *Env) ServeWebhooks(ctx context.Context, register func(webhook.Server)) error {
	opts := e.Environment.WebhookInstallOptions
	if opts.LocalServingPort == 0 {
		return errors.New("no webhooks were installed: set Options.Webhooks")
	}
	srv := webhook.NewServer(webhook.Options{
		Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir,
	})
	register(srv)
	failed := make(chan error, 1)
	go func() { failed <- srv.Start(ctx) }()
	check := srv.StartedChecker()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-failed:
			return false, fmt.Errorf("serving the webhooks: %w", err)
		default:
		}
		return check(&http.Request{}) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the webhook server on %s:%d did not start: %w", opts.LocalServingHost, opts.LocalServingPort, err)
	}
	return nil
}
