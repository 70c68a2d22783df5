package change

import (
	"strings"
	"testing"
)

// TestPreviewName keeps preview names within the limit, distinct, and
// readable when they fit.
func TestPreviewName(t *testing.T) {
	if got := PreviewName("to-dev", "web"); got != "to-dev-web" {
		t.Errorf("PreviewName(to-dev, web) = %q, want to-dev-web", got)
	}
	long := PreviewName(strings.Repeat("p", 60), "web")
	other := PreviewName(strings.Repeat("p", 60), "web2")
	if len(long) > maxPreviewName || long == other || !strings.HasPrefix(long, "ppp") {
		t.Errorf("long names %q and %q: want distinct, at most %d characters, starting with the promotion's name", long, other, maxPreviewName)
	}
	if got := PlanSecretName("to-dev", "web"); got != "to-dev-web.plan" {
		t.Errorf("PlanSecretName(to-dev, web) = %q, want to-dev-web.plan", got)
	}
}
