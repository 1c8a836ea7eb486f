package simhttp

import "fmt"

// QueueEntry is one fault: a mode applied to the next Times calls.
type QueueEntry struct {
	Mode  string
	Times int
}

// Queue hands out queued fault modes in order. It is not safe for
// concurrent use; the owning server guards it with its mutex.
type Queue struct {
	entries []QueueEntry
}

// NewQueue validates the entries against the allowed modes and copies them.
func NewQueue(entries []QueueEntry, allowed ...string) (Queue, error) {
	q := Queue{entries: make([]QueueEntry, 0, len(entries))}
	for i, e := range entries {
		if !contains(allowed, e.Mode) {
			return Queue{}, fmt.Errorf("fault %d: unknown mode %q (allowed: %v)", i, e.Mode, allowed)
		}
		if e.Times < 1 {
			return Queue{}, fmt.Errorf("fault %d: times must be at least 1, got %d", i, e.Times)
		}
		q.entries = append(q.entries, e)
	}
	return q, nil
}

// Next consumes one use of the head entry and returns its mode, or "" when
// the queue is empty (behave normally).
func (q *Queue) Next() string {
	if len(q.entries) == 0 {
		return ""
	}
	head := &q.entries[0]
	mode := head.Mode
	head.Times--
	if head.Times == 0 {
		q.entries = q.entries[1:]
	}
	return mode
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
