package pipelinectl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// OutputAPIVersion is the apiVersion of the documents `-o json` and `-o
// yaml` print. Fields are only ever added within it.
const OutputAPIVersion = "cli.stackyard.dev/v1"

// List is what `-o json|yaml` prints: the rows of one command, typed by
// kind (PipelineStatus, ReleaseList, History).
type List[T any] struct {
	// APIVersion is OutputAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind names the rows' type.
	Kind string `json:"kind"`
	// Items are the rows.
	Items []T `json:"items"`
}

// Formats are the values of -o.
var Formats = []string{"table", "json", "yaml"}

// Print writes rows in format: "json" or "yaml" as a List of kind, or
// (default "table") as an aligned table, the way kubectl prints, whose
// columns table gives.
func Print[T any](w io.Writer, format, kind string, rows []T, table func(T, time.Time) []string, header []string, now time.Time) error {
	list := List[T]{APIVersion: OutputAPIVersion, Kind: kind, Items: rows}
	if list.Items == nil {
		list.Items = []T{}
	}
	switch format {
	case "json", "yaml":
		return PrintObject(w, format, list)
	case "", "table":
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(table(r, now), "\t"))
		}
		return tw.Flush()
	default:
		return fmt.Errorf("-o %q: use one of %s", format, strings.Join(Formats, ", "))
	}
}

// StageColumns are the columns of `stackyard pipeline status`.
var StageColumns = []string{"PIPELINE", "STAGE", "RELEASE", "SINCE", "HEALTH", "STACKS", "WAITING FOR"}

// StageCells renders a StageRow as table cells.
func StageCells(r StageRow, now time.Time) []string {
	release := "<none>"
	if r.Release != "" {
		release = change.ShortCommit(r.Commit) + " " + oneLine(r.Subject, 50)
		if r.Rollback {
			release += " (rollback)"
		}
	}
	stacks := strconv.Itoa(int(r.Stacks))
	if r.Unconsented > 0 {
		stacks += fmt.Sprintf(" (+%d unconsented)", r.Unconsented)
	}
	return []string{r.Pipeline, r.Stage, release, age(r.Since, now), r.Health, stacks, dash(oneLine(r.WaitingFor, 80))}
}

// ReleaseColumns are the columns of `stackyard releases`.
var ReleaseColumns = []string{"NAME", "COMMIT", "TAG", "SUBJECT", "AGE", "IN", "VERIFIED IN"}

// ReleaseCells renders a ReleaseRow as table cells.
func ReleaseCells(r ReleaseRow, now time.Time) []string {
	return []string{r.Name, change.ShortCommit(r.Commit), dash(r.Tag), oneLine(r.Subject, 50), age(r.Time, now),
		dash(strings.Join(r.CurrentlyIn, ",")), dash(strings.Join(r.VerifiedIn, ","))}
}

// HistoryColumns are the columns of `stackyard history`.
var HistoryColumns = []string{"TIME", "EVENT", "STAGE", "RELEASE", "PROMOTION", "BY", "RESULT"}

// HistoryCells renders a HistoryEntry as table cells.
func HistoryCells(e HistoryEntry, _ time.Time) []string {
	event := e.Event
	if e.Rollback && e.Event != promotionv1alpha1.EventReleaseDiscovered {
		event += " (rollback)"
	}
	result := e.Phase
	if e.Message != "" {
		result += ": " + oneLine(e.Message, 60)
	}
	by := e.By
	if e.Policy != "" {
		by = "policy " + e.Policy
	}
	return []string{e.Time.UTC().Format(time.RFC3339), event, dash(e.Stage), e.Release, dash(e.Promotion), dash(by), dash(result)}
}

// oneLine is s's first line, cut at n runes.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// age is how long ago t was, as kubectl shows it, or "-".
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// PrintObject writes obj (a List, a Promotion) as json or yaml.
func PrintObject(w io.Writer, format string, obj any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		return enc.Encode(obj)
	case "yaml":
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	default:
		return fmt.Errorf("-o %q: use one of %s", format, strings.Join(Formats, ", "))
	}
}
