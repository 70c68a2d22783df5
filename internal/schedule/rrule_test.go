package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseRule(t *testing.T) {
	until := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	tests := []struct {
		name, in string
		want     string // canonical form
		wantErr  string
	}{
		{name: "empty", in: "", want: ""},
		{name: "daily", in: "FREQ=DAILY", want: "FREQ=DAILY"},
		{name: "prefix and lower case", in: "rrule:freq=weekly;byday=mo,we", want: "FREQ=WEEKLY;BYDAY=MO,WE"},
		{name: "days sorted, repeats dropped", in: "FREQ=WEEKLY;BYDAY=FR,MO,FR,SU", want: "FREQ=WEEKLY;BYDAY=SU,MO,FR"},
		{name: "interval", in: "FREQ=DAILY;INTERVAL=3", want: "FREQ=DAILY;INTERVAL=3"},
		{name: "interval one is implied", in: "FREQ=DAILY;INTERVAL=1", want: "FREQ=DAILY"},
		{name: "until date-time", in: "FREQ=DAILY;UNTIL=20261231T235959Z", want: "FREQ=DAILY;UNTIL=20261231T235959Z"},
		{name: "until date is the end of the day", in: "FREQ=DAILY;UNTIL=20261231", want: "FREQ=DAILY;UNTIL=" + until.Format("20060102T150405Z")},
		{name: "until floating", in: "FREQ=DAILY;UNTIL=20261231T120000", want: "FREQ=DAILY;UNTIL=20261231T120000Z"},
		{name: "no freq", in: "INTERVAL=2", wantErr: "FREQ is required"},
		{name: "monthly", in: "FREQ=MONTHLY", wantErr: "FREQ=MONTHLY is not supported"},
		{name: "count", in: "FREQ=DAILY;COUNT=3", wantErr: "COUNT is not supported"},
		{name: "numbered day", in: "FREQ=WEEKLY;BYDAY=1MO", wantErr: `"1MO" is not one of`},
		{name: "zero interval", in: "FREQ=DAILY;INTERVAL=0", wantErr: "INTERVAL=0 must be"},
		{name: "huge interval", in: "FREQ=DAILY;INTERVAL=99999999999", wantErr: "must be a whole number"},
		{name: "bad until", in: "FREQ=DAILY;UNTIL=tomorrow", wantErr: "UNTIL=TOMORROW is not a date"},
		{name: "twice", in: "FREQ=DAILY;FREQ=WEEKLY", wantErr: "FREQ appears twice"},
		{name: "no value", in: "FREQ=DAILY;BYDAY", wantErr: `"BYDAY" is not NAME=VALUE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRule(%q) = %v, want an error containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("ParseRule(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
