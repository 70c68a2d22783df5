package schedule

import (
	"errors"
	"slices"
	"time"
)

// Kind says whether a window allows promotions or denies them.
type Kind int

const (
	// Allow: promotions may start only inside an Allow window, when there
	// is any.
	Allow Kind = iota
	// Deny: no promotion starts inside a Deny window.
	Deny
)

const (
	secondsPerDay = 24 * 60 * 60
	// limit bounds every instant this package computes with, in Unix
	// seconds (about ±31,000 years), so that no day arithmetic overflows.
	limit = int64(1e12)
	// maxSteps bounds the search of OpenAt: how many window edges it walks
	// past before it gives up.
	maxSteps = 1000
)

// Window is one recurring time window: the occurrences of its rule, each
// starting at dtstart's time of day (UTC) on a day the rule selects, from
// dtstart's day on, and lasting dtend − dtstart. dtstart itself is an
// occurrence only when the rule selects its day (as in most iCalendar
// libraries).
type Window struct {
	// Kind is Allow or Deny.
	Kind Kind
	rule Rule
	// day0 and tod are dtstart's day number (days since 1970-01-01) and
	// second of the day; length is the occurrence's length in seconds.
	day0, tod, length int64
	// lastDay is the last day an occurrence may start (UNTIL), or limit.
	lastDay int64
	// days holds, for each weekday, whether the rule selects it.
	days [7]bool
}

// NewWindow returns the window of kind that repeats the occurrence from
// dtstart to dtend by rule.
func NewWindow(kind Kind, rule Rule, dtstart, dtend time.Time) (Window, error) {
	start, end := dtstart.Unix(), dtend.Unix()
	switch {
	case start <= -limit || start >= limit || end <= -limit || end >= limit:
		return Window{}, errors.New("dtstart and dtend must be within years 0 to 9999")
	case end <= start:
		return Window{}, errors.New("dtend must be at least one second after dtstart")
	}
	w := Window{Kind: kind, rule: rule, day0: floorDiv(start, secondsPerDay), tod: mod(start, secondsPerDay), length: end - start, lastDay: limit}
	if rule.Until != nil {
		w.lastDay = floorDiv(clamp(rule.Until.Unix())-w.tod, secondsPerDay)
	}
	switch {
	case rule.Freq == Once:
		w.days[weekday(w.day0)] = true
	case len(rule.ByDay) == 0 && rule.Freq == Weekly:
		w.days[weekday(w.day0)] = true
	case len(rule.ByDay) == 0:
		w.days = [7]bool{true, true, true, true, true, true, true}
	default:
		for _, d := range rule.ByDay {
			w.days[d] = true
		}
	}
	return w, nil
}

// At returns the occurrence t falls in, as [start, end), and whether there
// is one.
func (w Window) At(t time.Time) (start, end time.Time, ok bool) {
	ts := clamp(t.Unix())
	// Occurrences all last as long, so the one that started last before t
	// is the one that ends last: if t is not in it, it is in none.
	s, ok := w.latestStart(ts)
	if !ok || ts >= s+w.length {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(s, 0).UTC(), time.Unix(s+w.length, 0).UTC(), true
}

// Next returns the start of the first occurrence that starts after t, and
// whether there is one.
func (w Window) Next(t time.Time) (time.Time, bool) {
	s, ok := w.nextStart(clamp(t.Unix()))
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(s, 0).UTC(), true
}

// OpenAt returns the first instant at or after t at which windows let a
// promotion start: inside an Allow window, when there is any, and outside
// every Deny window. It returns t itself when they let it start now, and
// false when they never will (or not within the next thousand window
// edges).
func OpenAt(windows []Window, t time.Time) (time.Time, bool) {
	allows := slices.ContainsFunc(windows, func(w Window) bool { return w.Kind == Allow })
	for range maxSteps {
		if end, denied := deniedUntil(windows, t); denied {
			t = end
			continue
		}
		if !allows {
			return t, true
		}
		next, inside, ok := allowedFrom(windows, t)
		switch {
		case inside:
			return t, true
		case !ok:
			return time.Time{}, false
		}
		t = next
	}
	return time.Time{}, false
}

// deniedUntil reports whether t is inside a Deny window, and the latest end
// of the Deny occurrences it is in.
func deniedUntil(windows []Window, t time.Time) (time.Time, bool) {
	var until time.Time
	denied := false
	for _, w := range windows {
		if w.Kind != Deny {
			continue
		}
		if _, end, ok := w.At(t); ok {
			denied = true
			if end.After(until) {
				until = end
			}
		}
	}
	return until, denied
}

// allowedFrom reports whether t is inside an Allow window, and otherwise
// the earliest start of one after t (ok false when there is none).
func allowedFrom(windows []Window, t time.Time) (next time.Time, inside, ok bool) {
	for _, w := range windows {
		if w.Kind != Allow {
			continue
		}
		if _, _, in := w.At(t); in {
			return t, true, true
		}
		if s, found := w.Next(t); found && (!ok || s.Before(next)) {
			next, ok = s, true
		}
	}
	return next, false, ok
}

// latestStart returns the start, in Unix seconds, of the last occurrence
// that starts at or before ts.
func (w Window) latestStart(ts int64) (int64, bool) {
	last := min(floorDiv(ts-w.tod, secondsPerDay), w.lastDay)
	if last < w.day0 {
		return 0, false
	}
	n := int64(w.rule.Interval)
	switch w.rule.Freq {
	case Daily:
		// The weekday of day0 + k·n repeats every 7 steps of k.
		k := (last - w.day0) / n
		for i := int64(0); i < 7 && k-i >= 0; i++ {
			if d := w.day0 + (k-i)*n; w.days[weekday(d)] {
				return w.start(d), true
			}
		}
	case Weekly:
		// The selected week containing or before last, or the one before it.
		k := (week(last) - week(w.day0)) / n
		for kk := k; kk >= k-1 && kk >= 0; kk-- {
			monday := (week(w.day0)+kk*n)*7 - 3
			for off := int64(6); off >= 0; off-- {
				if d := monday + off; d <= last && d >= w.day0 && w.days[weekday(d)] {
					return w.start(d), true
				}
			}
		}
	default:
		return w.start(w.day0), true
	}
	return 0, false
}

// nextStart returns the start, in Unix seconds, of the first occurrence
// that starts after ts.
func (w Window) nextStart(ts int64) (int64, bool) {
	first := max(floorDiv(ts-w.tod, secondsPerDay)+1, w.day0)
	if first > w.lastDay {
		return 0, false
	}
	n := int64(w.rule.Interval)
	switch w.rule.Freq {
	case Daily:
		k := ceilDiv(first-w.day0, n)
		for i := range int64(7) {
			d := w.day0 + (k+i)*n
			if d > w.lastDay {
				return 0, false
			}
			if w.days[weekday(d)] {
				return w.start(d), true
			}
		}
	case Weekly:
		k := (week(first) - week(w.day0)) / n
		for kk := k; kk <= k+1; kk++ {
			monday := (week(w.day0)+kk*n)*7 - 3
			for off := range int64(7) {
				d := monday + off
				if d < first || !w.days[weekday(d)] {
					continue
				}
				if d > w.lastDay {
					return 0, false
				}
				return w.start(d), true
			}
		}
	default:
		if first == w.day0 {
			return w.start(w.day0), true
		}
	}
	return 0, false
}

// start is the start, in Unix seconds, of the occurrence on day d.
func (w Window) start(d int64) int64 { return d*secondsPerDay + w.tod }

// weekday is the weekday of day number d (day 0, 1970-01-01, a Thursday).
func weekday(d int64) time.Weekday { return time.Weekday(mod(d+4, 7)) }

// week is the number of the Monday-to-Sunday week holding day d; week w
// starts on day 7w − 3.
func week(d int64) int64 { return floorDiv(d+3, 7) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

func mod(a, b int64) int64 { return a - floorDiv(a, b)*b }

func clamp(ts int64) int64 { return max(min(ts, limit), -limit) }
