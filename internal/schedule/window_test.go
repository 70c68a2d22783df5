package schedule

import (
	"testing"
	"time"
)

// utc is a time on a day of March 2026 (the 2nd is a Monday).
func utc(day, hour, minute int) time.Time {
	return time.Date(2026, time.March, day, hour, minute, 0, 0, time.UTC)
}

func window(t *testing.T, kind Kind, rule string, start, end time.Time) Window {
	t.Helper()
	r, err := ParseRule(rule)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWindow(kind, r, start, end)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWindowAtAndNext(t *testing.T) {
	// Office hours: 09:00 to 17:00.
	nine, five := utc(2, 9, 0), utc(2, 17, 0)
	tests := []struct {
		name     string
		rule     string
		start    time.Time
		end      time.Time
		at       time.Time
		wantIn   bool
		wantFrom time.Time // start of the occurrence at `at`
		wantNext time.Time // zero: none
	}{
		{name: "once, before", start: nine, end: five, at: utc(2, 8, 0), wantNext: nine},
		{name: "once, at the start", start: nine, end: five, at: nine, wantIn: true, wantFrom: nine},
		{name: "once, at the end (exclusive)", start: nine, end: five, at: five},
		{name: "once, after", start: nine, end: five, at: utc(3, 10, 0)},
		{name: "daily, before dtstart", rule: "FREQ=DAILY", start: nine, end: five, at: utc(1, 10, 0), wantNext: nine},
		{name: "daily, inside a later day", rule: "FREQ=DAILY", start: nine, end: five, at: utc(20, 12, 0), wantIn: true, wantFrom: utc(20, 9, 0), wantNext: utc(21, 9, 0)},
		{name: "daily, evening", rule: "FREQ=DAILY", start: nine, end: five, at: utc(20, 18, 0), wantNext: utc(21, 9, 0)},
		{name: "every other day, off day", rule: "FREQ=DAILY;INTERVAL=2", start: nine, end: five, at: utc(3, 10, 0), wantNext: utc(4, 9, 0)},
		{name: "weekdays, Saturday", rule: "FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", start: nine, end: five, at: utc(7, 10, 0), wantNext: utc(9, 9, 0)},
		{name: "weekly on dtstart's weekday", rule: "FREQ=WEEKLY", start: nine, end: five, at: utc(9, 10, 0), wantIn: true, wantFrom: utc(9, 9, 0), wantNext: utc(16, 9, 0)},
		{name: "weekly, Tuesday", rule: "FREQ=WEEKLY", start: nine, end: five, at: utc(10, 10, 0), wantNext: utc(16, 9, 0)},
		{name: "fortnightly Mon/Thu, off week", rule: "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH", start: nine, end: five, at: utc(10, 10, 0), wantNext: utc(16, 9, 0)},
		{name: "fortnightly Mon/Thu, on Thursday", rule: "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH", start: nine, end: five, at: utc(19, 16, 59), wantIn: true, wantFrom: utc(19, 9, 0), wantNext: utc(30, 9, 0)},
		{name: "weekly, dtstart's day not selected", rule: "FREQ=WEEKLY;BYDAY=WE", start: nine, end: five, at: utc(2, 10, 0), wantNext: utc(4, 9, 0)},
		{name: "until cuts the series", rule: "FREQ=DAILY;UNTIL=20260305T090000Z", start: nine, end: five, at: utc(6, 10, 0)},
		{name: "until, last occurrence", rule: "FREQ=DAILY;UNTIL=20260305T090000Z", start: nine, end: five, at: utc(5, 10, 0), wantIn: true, wantFrom: utc(5, 9, 0)},
		{name: "a window longer than its period", rule: "FREQ=DAILY", start: nine, end: utc(4, 9, 0), at: utc(10, 8, 0), wantIn: true, wantFrom: utc(9, 9, 0), wantNext: utc(10, 9, 0)},
		{name: "weekend freeze across midnight", rule: "FREQ=WEEKLY;BYDAY=FR", start: utc(6, 18, 0), end: utc(9, 6, 0), at: utc(15, 23, 0), wantIn: true, wantFrom: utc(13, 18, 0), wantNext: utc(20, 18, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := window(t, Allow, tt.rule, tt.start, tt.end)
			from, _, in := w.At(tt.at)
			if in != tt.wantIn || !from.Equal(tt.wantFrom) {
				t.Errorf("At(%s) = %s, %v; want %s, %v", tt.at, from, in, tt.wantFrom, tt.wantIn)
			}
			next, ok := w.Next(tt.at)
			if ok != !tt.wantNext.IsZero() || !next.Equal(tt.wantNext) {
				t.Errorf("Next(%s) = %s, %v; want %s", tt.at, next, ok, tt.wantNext)
			}
		})
	}
}

func TestOpenAt(t *testing.T) {
	officeHours := window(t, Allow, "FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", utc(2, 9, 0), utc(2, 17, 0))
	lunch := window(t, Deny, "FREQ=DAILY", utc(2, 12, 0), utc(2, 13, 0))
	freeze := window(t, Deny, "", utc(10, 0, 0), utc(12, 0, 0))
	tests := []struct {
		name    string
		windows []Window
		at      time.Time
		want    time.Time // zero: never
	}{
		{name: "no windows", at: utc(7, 3, 0), want: utc(7, 3, 0)},
		{name: "inside office hours", windows: []Window{officeHours, lunch}, at: utc(3, 10, 0), want: utc(3, 10, 0)},
		{name: "lunch", windows: []Window{officeHours, lunch}, at: utc(3, 12, 30), want: utc(3, 13, 0)},
		{name: "weekend", windows: []Window{officeHours, lunch}, at: utc(7, 10, 0), want: utc(9, 9, 0)},
		{name: "a deny window that ends outside the allow windows", windows: []Window{officeHours, freeze}, at: utc(10, 10, 0), want: utc(12, 9, 0)},
		{name: "only deny, outside", windows: []Window{freeze}, at: utc(9, 10, 0), want: utc(9, 10, 0)},
		{name: "only deny, inside", windows: []Window{freeze}, at: utc(11, 10, 0), want: utc(12, 0, 0)},
		{name: "an allow window that never comes back", windows: []Window{window(t, Allow, "", utc(2, 9, 0), utc(2, 10, 0))}, at: utc(3, 0, 0)},
		{name: "always denied", windows: []Window{window(t, Deny, "FREQ=DAILY", utc(2, 0, 0), utc(3, 0, 0))}, at: utc(3, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := OpenAt(tt.windows, tt.at)
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Errorf("OpenAt(%s) = %s, %v; want %s", tt.at, got, ok, tt.want)
			}
		})
	}
}

func TestNewWindowRefusesAnEmptyOccurrence(t *testing.T) {
	if _, err := NewWindow(Allow, Rule{}, utc(2, 9, 0), utc(2, 9, 0)); err == nil {
		t.Error("a window that ends when it starts was accepted")
	}
}
