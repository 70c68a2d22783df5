package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Results of stackyard_notifications_total.
const (
	NotificationDelivered = "delivered"
	NotificationFailed    = "failed"
)

// Notifications counts the Alerts' delivery attempts. A nil
// *Notifications records nothing.
type Notifications struct {
	total *prometheus.CounterVec
}

// NewNotifications creates the notification metric (not yet registered;
// see RegisterCollectors).
func NewNotifications() *Notifications {
	return &Notifications{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stackyard_notifications_total",
		Help: "Notification delivery attempts by namespace, alert and result (delivered, failed).",
	}, []string{"namespace", "alert", "result"})}
}

// ObserveDelivery records one delivery attempt of an Alert with result.
func (n *Notifications) ObserveDelivery(namespace, alert, result string) {
	if n != nil {
		n.total.WithLabelValues(namespace, alert, result).Inc()
	}
}

// Collectors returns the metric's collectors, for registration.
func (n *Notifications) Collectors() []prometheus.Collector {
	return []prometheus.Collector{n.total}
}
