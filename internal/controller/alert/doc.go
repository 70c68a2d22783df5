// Package alert reconciles Alerts (notification.stackyard.dev): woken by
// changes to the Promotions, Releases and Stacks of an Alert's namespace,
// it computes the events that hold now (level-triggered facts with stable
// keys), and sends each one the Alert has not sent yet to its Provider,
// remembering it in status. Delivery is at least once: an event is sent
// again only when the status that records it could not be written.
package alert
