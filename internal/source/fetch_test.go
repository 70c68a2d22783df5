package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFetchNeedsOneSource(t *testing.T) {
	for name, spec := range map[string]Spec{
		"none": {},
		"two":  {Git: &GitSpec{URL: "https://example.invalid/x.git"}, Project: &ProjectSpec{Name: "p", Runtime: "yaml"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Fetch(context.Background(), t.TempDir(), spec)
			if e := wantReason(t, err, ReasonInvalidSpec); !e.Permanent {
				t.Errorf("not permanent: %v", err)
			}
		})
	}
	res, err := Fetch(context.Background(), filepath.Join(t.TempDir(), "p"), Spec{Project: &ProjectSpec{Name: "p", Runtime: "yaml"}})
	if err != nil || res.Revision() != "" {
		t.Fatalf("Fetch of a project = %+v, %v", res, err)
	}
}

func TestReport(t *testing.T) {
	if r := NewReport(&Result{Commit: "abc"}, nil); r.Failed() || r.Revision != "abc" || r.Err() != nil {
		t.Errorf("success report = %+v", r)
	}
	failure := NewReport(nil, newError(ReasonAuthFailed, FieldAuth, nil, "refused"))
	var e *Error
	if !failure.Failed() || !errors.As(failure.Err(), &e) || e.Reason != ReasonAuthFailed || !e.Permanent || e.Field != FieldAuth {
		t.Errorf("failure report = %+v", failure)
	}
	if r := NewReport(nil, errors.New("disk full")); r.Reason != ReasonInternal || r.Permanent {
		t.Errorf("untyped failure report = %+v", r)
	}

	// A long message is cut to fit a termination message, on a rune
	// boundary, and reads back.
	long := Report{Reason: ReasonUnreachable, Message: strings.Repeat("é", 5000)}
	path := filepath.Join(t.TempDir(), "report")
	if err := long.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxReportBytes+1 {
		t.Errorf("report is %d bytes", len(b))
	}
	back, err := ParseReport(string(b))
	if err != nil || back.Reason != ReasonUnreachable || !strings.HasSuffix(back.Message, "...") || !utf8.ValidString(back.Message) {
		t.Errorf("read back %+v, %v", back, err)
	}
}
