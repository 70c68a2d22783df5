// Package schedule answers when a recurring time window is open: the
// promotion windows of a Stage (promotion.stackyard.dev/v1alpha1).
//
// A window is an iCalendar event (RFC 5545) reduced to what promotion
// windows need: a first occurrence from dtstart to dtend, repeated by a
// recurrence rule with the parts FREQ (DAILY or WEEKLY), INTERVAL, BYDAY
// and UNTIL. Every occurrence starts at dtstart's time of day, in UTC, and
// lasts dtend − dtstart. The rule is user input, so ParseRule refuses
// anything else by name rather than guessing at it.
//
// Everything is computed from Unix seconds and day numbers, never by
// stepping through occurrences one at a time, so that the answer costs the
// same for a window that started yesterday or ten years ago.
package schedule
