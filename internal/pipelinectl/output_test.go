package pipelinectl

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(-d))
	return &t
}

var rows = []StageRow{
	{Pipeline: "web", Stage: "dev", Release: "web-0123456789", Commit: "0123456789abcdef0123456789abcdef01234567", Subject: "Add the bucket\n\nlong body", Since: at(5 * time.Minute), Health: "Healthy", Stacks: 12, Unconsented: 2},
	{Pipeline: "web", Stage: "qa", Health: "Unknown", Stacks: 1, WaitingFor: "release web-0123456789: soaking in dev until 12:10"},
}

// TestStageTable pins the table's shape: aligned columns, short SHAs,
// subjects on one line, "-" for nothing.
func TestStageTable(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, "table", "PipelineStatus", rows, StageCells, StageColumns, now); err != nil {
		t.Fatal(err)
	}
	want := `PIPELINE   STAGE   RELEASE                  SINCE   HEALTH    STACKS                WAITING FOR
web        dev     0123456 Add the bucket   5m      Healthy   12 (+2 unconsented)   -
web        qa      <none>                   -       Unknown   1                     release web-0123456789: soaking in dev until 12:10
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestStageJSON pins -o json: a versioned list whose field names are a
// contract.
func TestStageJSON(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, "json", "PipelineStatus", rows[1:], StageCells, StageColumns, now); err != nil {
		t.Fatal(err)
	}
	want := `{
    "apiVersion": "cli.stackyard.dev/v1",
    "kind": "PipelineStatus",
    "items": [
        {
            "pipeline": "web",
            "stage": "qa",
            "health": "Unknown",
            "stacks": 1,
            "waitingFor": "release web-0123456789: soaking in dev until 12:10"
        }
    ]
}
`
	if b.String() != want {
		t.Errorf("json:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := Print[StageRow](&b, "json", "PipelineStatus", nil, StageCells, StageColumns, now); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"items": []`)) {
		t.Errorf("no rows must print an empty list, not null: %s", b.String())
	}
}

func TestPrintRefusesUnknownFormat(t *testing.T) {
	var b bytes.Buffer
	err := Print(&b, "wide", "PipelineStatus", rows, StageCells, StageColumns, now)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("-o \"wide\"")) {
		t.Errorf("want an error naming -o, got %v", err)
	}
}

// TestHistoryCells: a fired policy rule shows the rule where a person
// would be, with its action and message as the result.
func TestHistoryCells(t *testing.T) {
	tests := []struct {
		name string
		e    HistoryEntry
		want []string
	}{
		{name: "a decision", e: HistoryEntry{Time: *at(0), Event: promotionv1alpha1.EventApprovalGiven, Stage: "prod", Release: "r1", Promotion: "prod-1",
			By: "alice", Phase: "Approve", Message: "fine"},
			want: []string{"2026-11-25T12:00:00Z", "ApprovalGiven", "prod", "r1", "prod-1", "alice", "Approve: fine"}},
		{name: "a fired rule", e: HistoryEntry{Time: *at(0), Event: promotionv1alpha1.EventPolicyFired, Stage: "prod", Release: "r1", Promotion: "prod-1",
			Policy: "db-replace", Phase: "RequireApproval", Message: "a database would be replaced"},
			want: []string{"2026-11-25T12:00:00Z", "PolicyFired", "prod", "r1", "prod-1", "policy db-replace", "RequireApproval: a database would be replaced"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HistoryCells(tt.e, now); !slices.Equal(got, tt.want) {
				t.Errorf("HistoryCells = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReviewFleet: a review of several Stacks sums them up by what they
// change, above the Stacks; one of a single Stack does not.
func TestReviewFleet(t *testing.T) {
	update := &promotionv1alpha1.ChangeSummary{Update: 1, Same: 3}
	replace := &promotionv1alpha1.ChangeSummary{Update: 1, Replace: 1}
	r := Review{Promotion: "edge-x", Release: "web-0123456789", Stage: "edge", Phase: "Pending",
		Stacks: []StackReview{{Name: "eu", Summary: update}, {Name: "us", Summary: update}, {Name: "ap", Summary: replace}}}
	var b bytes.Buffer
	if err := WriteReview(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "in all, 3 Stacks: 2 with 1 to update; 1 with 1 to update, 1 to replace\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the review lacks %q:\n%s", want, b.String())
	}
	r.Stacks = r.Stacks[:1]
	if got := r.Fleet(); got != "" {
		t.Errorf("one Stack: Fleet() = %q, want nothing", got)
	}
}

// TestReviewRollout: the review of a promotion that rolls out in waves
// says where it is, why it halted, each wave's Stacks, the checks of the
// wave checked last, and who intervened;
// one into a stage without a rollout says nothing of waves.
func TestReviewRollout(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-x"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "edge", Release: "web-0123456789"},
		Status: promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionRunning, Stacks: []promotionv1alpha1.PromotedStack{
			{Name: "eu", Wave: 1, State: promotionv1alpha1.StackSucceeded},
			{Name: "us", Wave: 2, State: promotionv1alpha1.StackFailed},
			{Name: "ap", Wave: 2, State: promotionv1alpha1.StackPending},
		}, Rollout: &promotionv1alpha1.RolloutStatus{
			Spec: &promotionv1alpha1.Rollout{}, Waves: 2, Wave: 2, Halted: "the failure budget is spent",
			Counts:        promotionv1alpha1.RolloutCounts{Succeeded: 1, Failed: 1, Pending: 1},
			Interventions: []promotionv1alpha1.InterventionRecord{{Action: promotionv1alpha1.Halt, User: "ada", Time: at, Reason: "quota"}},
			Verification: &promotionv1alpha1.WaveVerification{Wave: 1, Attempt: 2, VerificationStatus: promotionv1alpha1.VerificationStatus{
				Phase: "Succeeded", Message: "verification check health passed",
			}},
		}},
	}
	var b bytes.Buffer
	if err := WriteReview(&b, BuildReview(p, nil, PlanData{}, false)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rollout: wave 2 of 2; 1 succeeded, 1 failed (budget 0), 0 updating, 1 pending, 0 skipped\n",
		"  halted: the failure budget is spent\n",
		"  wave 1: eu Succeeded\n    checks Succeeded (attempt 2): verification check health passed\n  wave 2: us Failed, ap Pending\n",
		"  Halt by ada at 2026-12-07T10:00:00Z: quota\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the review lacks %q:\n%s", want, b.String())
		}
	}
	p.Status.Rollout.Spec = nil // a stage without a rollout, halted by a person
	b.Reset()
	if err := WriteReview(&b, BuildReview(p, nil, PlanData{}, false)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "rollout:") {
		t.Errorf("a promotion without a rollout shows one:\n%s", b.String())
	}
}
