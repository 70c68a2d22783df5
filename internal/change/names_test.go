package change

import (
	"strings"
	"testing"
)

// TestPreviewName keeps preview names within the limit, distinct, and
// readable when they fit.
func TestPreviewName(t *testing.T) {
	if got := PreviewName("to-dev", "web", 1); got != "to-dev-web" {
		t.Errorf("PreviewName(to-dev, web) = %q, want to-dev-web", got)
	}
	long := PreviewName(strings.Repeat("p", 60), "web", 1)
	other := PreviewName(strings.Repeat("p", 60), "web2", 1)
	if len(long) > maxPreviewName || long == other || !strings.HasPrefix(long, "ppp") {
		t.Errorf("long names %q and %q: want distinct, at most %d characters, starting with the promotion's name", long, other, maxPreviewName)
	}
	if got := PlanSecretName("to-dev", "web", 1); got != "to-dev-web.plan" {
		t.Errorf("PlanSecretName(to-dev, web) = %q, want to-dev-web.plan", got)
	}
	// Later rounds: distinct from the first and from each other, within
	// the limit, also for names short enough to be used as they are.
	seen := map[string]bool{}
	for _, pair := range [][2]string{{"to-dev", "web"}, {strings.Repeat("p", 60), "web"}} {
		for round := int32(1); round <= 3; round++ {
			name := PreviewName(pair[0], pair[1], round)
			if seen[name] || len(name) > maxPreviewName {
				t.Errorf("PreviewName(%s, %s, %d) = %q: want a new name of at most %d characters", pair[0], pair[1], round, name, maxPreviewName)
			}
			seen[name] = true
		}
	}
	if PreviewName("to-dev", "web", 0) != PreviewName("to-dev", "web", 1) {
		t.Error("round 0 (a promotion recorded before rounds) must name the first round")
	}
}

// TestReviewStackName: a review stack's name fits a Stack's 42 characters,
// is the plain "<pipeline>-pr-<number>" when that fits, and differs for
// pipelines whose names begin alike.
func TestReviewStackName(t *testing.T) {
	if got := ReviewStackName("web", 7); got != "web-pr-7" {
		t.Errorf("ReviewStackName(web, 7) = %q", got)
	}
	long := strings.Repeat("a", 40)
	a, b := ReviewStackName(long+"-one", 12345), ReviewStackName(long+"-two", 12345)
	for _, name := range []string{a, b, ReviewStackName(strings.Repeat("b", 253), 1<<62)} {
		if len(name) > 42 || !strings.Contains(name, "-pr-") || strings.HasPrefix(name, "-") {
			t.Errorf("ReviewStackName = %q (%d characters)", name, len(name))
		}
	}
	if a == b {
		t.Errorf("two pipelines share the review stack %q", a)
	}
	if !strings.HasSuffix(a, "-pr-12345") {
		t.Errorf("%q does not end in its pull request", a)
	}
}
