package update

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/redact"
)

// The bounds of status.logTail (the API's validation).
const (
	maxLogLines    = 40
	maxLogLineSize = 512
)

// colorTag matches the engine's colour markup ("<{%reset%}>").
var colorTag = regexp.MustCompile(`<\{%[^%]*%\}>`)

// logTail keeps the end of an operation's log, written from its engine
// events as the CLI would print them: resource steps (not "same"), failed
// steps, diagnostics and the summary. The agent has masked secret values in
// the events; Lines masks secret outputs again, which only the operation's
// end reveals. Entries are kept whole until then, so that a secret that
// spans lines (a PEM key printed by the program) is masked before the text
// is split.
type logTail struct {
	entries []logEntry
}

// logEntry is one event's text, and the prefix of each of its lines.
type logEntry struct {
	prefix, text string
}

// observe adds the lines e stands for.
func (l *logTail) observe(e *agentpb.EngineEvent) {
	fields := e.GetEvent().GetFields()[e.GetType()].GetStructValue().GetFields()
	switch e.GetType() {
	case "resourcePreEvent":
		md := fields["metadata"].GetStructValue().GetFields()
		if op := md["op"].GetStringValue(); op != "" && op != "same" {
			l.add(fmt.Sprintf("%s %s %s", op, md["type"].GetStringValue(), urnName(md["urn"].GetStringValue())))
		}
	case "resOpFailedEvent":
		md := fields["metadata"].GetStructValue().GetFields()
		l.add(fmt.Sprintf("failed: %s %s", md["op"].GetStringValue(), urnName(md["urn"].GetStringValue())))
	case "diagnosticEvent":
		if fields["ephemeral"].GetBoolValue() {
			return
		}
		prefix := fields["severity"].GetStringValue()
		if urn := fields["urn"].GetStringValue(); urn != "" {
			prefix += " " + urnName(urn)
		}
		if text := strings.TrimSpace(colorTag.ReplaceAllString(fields["message"].GetStringValue(), "")); text != "" {
			l.entries = append(l.entries, logEntry{prefix: prefix + ": ", text: text})
			l.trim()
		}
	case "summaryEvent":
		l.add("summary: " + summaryLine(fields["resourceChanges"].GetStructValue(), fields["durationSeconds"].GetNumberValue()))
	case "cancelEvent":
		l.add("cancelled")
	}
}

// add adds a one-line entry.
func (l *logTail) add(line string) {
	l.entries = append(l.entries, logEntry{text: line})
	l.trim()
}

// trim drops entries that can no longer reach the tail: each makes at
// least one line.
func (l *logTail) trim() {
	if len(l.entries) > maxLogLines {
		l.entries = slices.Delete(l.entries, 0, len(l.entries)-maxLogLines)
	}
}

// Lines returns the last lines with secrets masked (in each entry as a
// whole, then split) and each line cut to the API's bound.
func (l *logTail) Lines(secrets *redact.Set) []string {
	var out []string
	for _, e := range l.entries {
		for _, line := range strings.Split(secrets.Redact(e.text), "\n") {
			if line = strings.TrimRight(line, " \r\t"); line == "" {
				continue
			}
			line = e.prefix + line
			if len(line) > maxLogLineSize {
				line = strings.ToValidUTF8(line[:maxLogLineSize-3], "") + "..."
			}
			out = append(out, line)
		}
	}
	if len(out) > maxLogLines {
		out = out[len(out)-maxLogLines:]
	}
	return out
}

// urnName is a URN's resource name (what follows its last "::").
func urnName(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}

// summaryLine says a summary's counts ("create=1 same=2") and duration.
func summaryLine(changes *structpb.Struct, seconds float64) string {
	counts := changes.GetFields()
	ops := make([]string, 0, len(counts))
	for op := range counts {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	parts := make([]string, 0, len(ops)+1)
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s=%d", op, int(counts[op].GetNumberValue())))
	}
	if len(parts) == 0 {
		parts = append(parts, "no changes")
	}
	return strings.Join(parts, " ") + fmt.Sprintf(" in %gs", seconds)
}
