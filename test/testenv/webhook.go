package testenv

import (
	"bytes"
	"fmt"
	"net/http"
	"time"
)

// AwaitWebhook waits until the receiver endpoint at url knows its
// Receiver: an unsigned POST is then refused for its signature, not for
// its path. The operator finds Receivers in its cache, which may hear of
// a Receiver's status.webhookPath a moment after a test reads it, and a
// forge does not retry a delivery answered 404.
func AwaitWebhook(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Post(url, "application/json", bytes.NewReader([]byte("{}"))) //nolint:gosec // the test webhook's own loopback address
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still answers 404 (or fails: %v) after %s", url, err, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
