package docscheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJSONPathFields(t *testing.T) {
	tests := []struct {
		tmpl    string
		want    [][]string
		wantErr bool
	}{
		{`{.status.currentRelease.name}{"\n"}`, [][]string{{"status", "currentRelease", "name"}}, false},
		{`{range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}`,
			[][]string{{"status", "conditions", "[]"}, {"status", "conditions", "[]", "type"}, {"status", "conditions", "[]", "status"}, {"status", "conditions", "[]", "reason"}}, false},
		{`{.status.conditions[?(@.type=="Ready")].message}`, [][]string{{"status", "conditions", "[]", "message"}}, false},
		{`{range .items[*]}{.metadata.annotations['pulumi.com/x']}{end}`,
			[][]string{{"metadata", "annotations", "pulumi.com/x"}}, false},
		{`{range .status.logTail[*]}{@}{"\n"}{end}`, [][]string{{"status", "logTail", "[]"}}, false},
		{`.status.x`, [][]string{{"status", "x"}}, false},
		{`{.status.x`, nil, true},
		{`{end}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			got, err := JSONPathFields(tt.tmpl)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCustomColumnsFields(t *testing.T) {
	got, err := CustomColumnsFields("NAME:.metadata.name,CURRENT:.status.currentUpdate.name")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"metadata", "name"}, {"status", "currentUpdate", "name"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := CustomColumnsFields("NAME"); err == nil {
		t.Error("a column without a path was accepted")
	}
}
