package provider

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

// JournalEnv names, in the provider's environment, a file to which every
// write the provider makes is appended: one line per Create, Update and
// Delete that was not a preview and succeeded (see JournalEntry). Tests of
// fault tolerance read it to count how often each change reached a
// resource.
//
// The Pulumi CLI passes its own environment to the plugins it starts, and
// a stackyard agent passes its Workspace's spec.env to the CLI, so a Stack
// sets it with spec.envRefs (a literal) whatever runtime runs its agent.
// Writers in several processes may share the file: each line is one
// write(2) on a file opened with O_APPEND, which the kernel does not
// interleave with another.
const JournalEnv = "STACKYARD_TEST_PROVIDER_JOURNAL"

// JournalEntry is one line of the journal, as JSON.
type JournalEntry struct {
	// Time is when the write ended.
	Time time.Time `json:"time"`
	// PID is the provider process that made it.
	PID int `json:"pid"`
	// Op is create, update or delete.
	Op string `json:"op"`
	// URN is the resource's URN.
	URN string `json:"urn"`
	// ID is the resource's ID ("" for a create that failed, which is not
	// journalled).
	ID string `json:"id"`
	// Inputs are the inputs the write applied (the old state for a
	// delete), secret values replaced by "[secret]".
	Inputs map[string]any `json:"inputs"`
}

// journalOp names the kinds of writes in JournalEntry.Op.
type journalOp string

const (
	journalCreate journalOp = "create"
	journalUpdate journalOp = "update"
	journalDelete journalOp = "delete"
)

// journal appends one entry to the file JournalEnv names, if it names
// one. An entry that cannot be written fails the operation: a test
// counting writes must not silently miss one.
func journal(op journalOp, urn, id string, inputs resource.PropertyMap) error {
	path := os.Getenv(JournalEnv)
	if path == "" {
		return nil
	}
	entry := JournalEntry{Time: time.Now(), PID: os.Getpid(), Op: string(op), URN: urn, ID: id, Inputs: journalValues(inputs)}
	line, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("encoding the journal entry: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) //nolint:gosec // the test provider's journal, where its test says
	if err != nil {
		return fmt.Errorf("opening the journal %s: %w", path, err)
	}
	_, werr := f.Write(append(line, '\n'))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("writing the journal %s: %w", path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("closing the journal %s: %w", path, cerr)
	}
	return nil
}

// journalValues returns m as plain JSON values, secrets masked.
func journalValues(m resource.PropertyMap) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if v.ContainsSecrets() {
			out[string(k)] = "[secret]"
			continue
		}
		out[string(k)] = plain(v).Mappable()
	}
	return out
}

// ReadJournal returns the entries of the journal at path, oldest first;
// none when the file does not exist (nothing was written yet).
func ReadJournal(path string) ([]JournalEntry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []JournalEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("journal %s: line %q: %w", path, sc.Text(), err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the journal %s: %w", path, err)
	}
	return out, nil
}
