package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Frequency is how often a rule repeats.
type Frequency int

const (
	// Once is the frequency of the empty rule: the window occurs once.
	Once Frequency = iota
	// Daily repeats every INTERVAL days.
	Daily
	// Weekly repeats every INTERVAL weeks (weeks start on Monday).
	Weekly
)

// MaxInterval is the largest INTERVAL a rule may have; larger ones are
// refused rather than risking overflow in the day arithmetic.
const MaxInterval = 100000

// Rule is a parsed recurrence rule. The zero value is the empty rule: one
// occurrence.
type Rule struct {
	// Freq is DAILY, WEEKLY, or Once for the empty rule.
	Freq Frequency
	// Interval is the step between repetitions, in days or weeks; at least
	// 1 for a repeating rule.
	Interval int
	// ByDay limits occurrences to these weekdays, sorted, without
	// repeats; empty means every day (DAILY) or dtstart's weekday (WEEKLY).
	ByDay []time.Weekday
	// Until, when set, is the last instant an occurrence may start, in UTC.
	Until *time.Time
}

// dayCodes are iCalendar's weekday names.
var dayCodes = map[string]time.Weekday{
	"SU": time.Sunday, "MO": time.Monday, "TU": time.Tuesday, "WE": time.Wednesday,
	"TH": time.Thursday, "FR": time.Friday, "SA": time.Saturday,
}

// ParseRule parses the supported subset of an RFC 5545 RRULE, e.g.
// "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TU;UNTIL=20261231T235959Z". Part names
// and values are case-insensitive and an "RRULE:" prefix is allowed. UNTIL
// is a UTC date-time (…T…Z), a floating date-time (read as UTC) or a date,
// which means the end of that day. The empty string is the rule that never
// repeats. Any other part (COUNT, BYMONTH, a numbered BYDAY such as 1MO…)
// is refused, naming it.
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	if len(s) >= len("RRULE:") && strings.EqualFold(s[:len("RRULE:")], "RRULE:") {
		s = s[len("RRULE:"):]
	}
	if s == "" {
		return Rule{}, nil
	}
	var r Rule
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ";") {
		key, value, ok := strings.Cut(part, "=")
		key = strings.ToUpper(strings.TrimSpace(key))
		value = strings.ToUpper(strings.TrimSpace(value))
		if !ok || key == "" {
			return Rule{}, fmt.Errorf("rrule: %q is not NAME=VALUE", part)
		}
		if seen[key] {
			return Rule{}, fmt.Errorf("rrule: %s appears twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "FREQ":
			r.Freq, err = parseFreq(value)
		case "INTERVAL":
			r.Interval, err = parseInterval(value)
		case "BYDAY":
			r.ByDay, err = parseByDay(value)
		case "UNTIL":
			var until time.Time
			until, err = parseUntil(value)
			r.Until = &until
		default:
			err = fmt.Errorf("rrule: %s is not supported (only FREQ, INTERVAL, BYDAY and UNTIL are)", key)
		}
		if err != nil {
			return Rule{}, err
		}
	}
	if r.Freq == Once {
		return Rule{}, errors.New("rrule: FREQ is required (DAILY or WEEKLY)")
	}
	if r.Interval == 0 {
		r.Interval = 1
	}
	return r, nil
}

func parseFreq(v string) (Frequency, error) {
	switch v {
	case "DAILY":
		return Daily, nil
	case "WEEKLY":
		return Weekly, nil
	default:
		return Once, fmt.Errorf("rrule: FREQ=%s is not supported (only DAILY and WEEKLY are)", v)
	}
}

func parseInterval(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxInterval {
		return 0, fmt.Errorf("rrule: INTERVAL=%s must be a whole number from 1 to %d", v, MaxInterval)
	}
	return n, nil
}

func parseByDay(v string) ([]time.Weekday, error) {
	var days []time.Weekday
	for _, code := range strings.Split(v, ",") {
		d, ok := dayCodes[strings.TrimSpace(code)]
		if !ok {
			return nil, fmt.Errorf("rrule: BYDAY=%s: %q is not one of MO, TU, WE, TH, FR, SA, SU", v, code)
		}
		if !slices.Contains(days, d) {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	return days, nil
}

func parseUntil(v string) (time.Time, error) {
	for _, layout := range []string{"20060102T150405Z", "20060102T150405"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	if t, err := time.Parse("20060102", v); err == nil {
		return t.Add(24*time.Hour - time.Second).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("rrule: UNTIL=%s is not a date (20060102) or a date-time (20060102T150405Z)", v)
}

// String returns the rule in the canonical form ParseRule reads back:
// FREQ, INTERVAL, BYDAY and UNTIL in that order, UNTIL as a UTC date-time.
func (r Rule) String() string {
	if r.Freq == Once {
		return ""
	}
	parts := []string{"FREQ=" + map[Frequency]string{Daily: "DAILY", Weekly: "WEEKLY"}[r.Freq]}
	if r.Interval > 1 {
		parts = append(parts, "INTERVAL="+strconv.Itoa(r.Interval))
	}
	if len(r.ByDay) > 0 {
		codes := make([]string, len(r.ByDay))
		for i, d := range r.ByDay {
			codes[i] = strings.ToUpper(d.String()[:2])
		}
		parts = append(parts, "BYDAY="+strings.Join(codes, ","))
	}
	if r.Until != nil {
		parts = append(parts, "UNTIL="+r.Until.UTC().Format("20060102T150405Z"))
	}
	return strings.Join(parts, ";")
}
