package schedule

import (
	"testing"
	"time"
)

// FuzzRule parses arbitrary rules and checks, for those accepted, that the
// canonical form reads back the same, and that At and Next agree with
// walking the occurrences day by day.
func FuzzRule(f *testing.F) {
	f.Add("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH;UNTIL=20260601T000000Z", int64(1772442000), int64(28800), int64(1773000000))
	f.Add("FREQ=DAILY", int64(0), int64(3600), int64(-86400))
	f.Add("", int64(1772442000), int64(1), int64(1772442000))
	f.Fuzz(func(t *testing.T, rule string, start, length, at int64) {
		r, err := ParseRule(rule)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil || again.String() != r.String() {
			t.Fatalf("%q → %q → %q, %v", rule, r.String(), again.String(), err)
		}
		start, at = start%(400*365*secondsPerDay), at%(400*365*secondsPerDay)
		length = 1 + mod(length, 30*secondsPerDay)
		w, err := NewWindow(Allow, r, time.Unix(start, 0), time.Unix(start+length, 0))
		if err != nil {
			t.Fatal(err)
		}
		tm := time.Unix(at, 0)
		from, end, in := w.At(tm)
		if in && (tm.Before(from) || !tm.Before(end)) {
			t.Fatalf("At(%s) = [%s, %s)", tm, from, end)
		}
		next, ok := w.Next(tm)
		if ok && !next.After(tm) {
			t.Fatalf("Next(%s) = %s", tm, next)
		}
		// Walk the days when it is cheap enough.
		atDay := floorDiv(at-w.tod, secondsPerDay)
		if atDay-w.day0 > 3000 || int64(r.Interval) > 50 {
			return
		}
		wantIn, wantNext, found := false, int64(0), false
		for d := w.day0; d <= atDay+8*7*int64(max(r.Interval, 1)); d++ {
			if !w.occurs(d) {
				continue
			}
			s := w.start(d)
			if s <= at && at < s+length {
				wantIn = true
			}
			if s > at && !found {
				wantNext, found = s, true
			}
		}
		if in != wantIn {
			t.Fatalf("At(%s) in = %v, walking says %v", tm, in, wantIn)
		}
		if found != ok || (ok && next.Unix() != wantNext) {
			t.Fatalf("Next(%s) = %s %v, walking says %s", tm, next, ok, time.Unix(wantNext, 0).UTC())
		}
	})
}

// occurs reports, by the rule's definition, whether an occurrence starts on
// day d.
func (w Window) occurs(d int64) bool {
	if d < w.day0 || d > w.lastDay || !w.days[weekday(d)] {
		return false
	}
	n := int64(w.rule.Interval)
	switch w.rule.Freq {
	case Daily:
		return (d-w.day0)%n == 0
	case Weekly:
		return (week(d)-week(w.day0))%n == 0
	default:
		return d == w.day0
	}
}
