// Package receiver reconciles Receivers (notification.stackyard.dev): it
// reads each one's token and publishes the path its webhook is served at
// (status.webhookPath). The requests themselves are served by
// internal/receiver.
package receiver
