package simhttp

import (
	"fmt"
	"slices"
	"time"
)

// Fault applies Mode to the next Times calls. Each simulator names this
// type for its own modes (riskapi.CreateFault, releaseapi.SearchFault ...).
type Fault[M ~string] struct {
	Mode  M   `json:"mode"`
	Times int `json:"times"`
}

// Queue hands out queued fault modes in order. It is not safe for
// concurrent use; the owning server guards it with its mutex.
type Queue[M ~string] struct {
	faults []Fault[M]
}

// NewQueue validates the faults against the allowed modes and copies them.
func NewQueue[M ~string](faults []Fault[M], allowed ...M) (Queue[M], error) {
	q := Queue[M]{faults: make([]Fault[M], 0, len(faults))}
	for i, f := range faults {
		if !slices.Contains(allowed, f.Mode) {
			return Queue[M]{}, fmt.Errorf("fault %d: unknown mode %q (allowed: %v)", i, f.Mode, allowed)
		}
		if f.Times < 1 {
			return Queue[M]{}, fmt.Errorf("fault %d: times must be at least 1, got %d", i, f.Times)
		}
		q.faults = append(q.faults, f)
	}
	return q, nil
}

// Next consumes one use of the head fault and returns its mode, or "" when
// the queue is empty (behave normally).
func (q *Queue[M]) Next() M {
	if len(q.faults) == 0 {
		return ""
	}
	head := &q.faults[0]
	mode := head.Mode
	head.Times--
	if head.Times == 0 {
		q.faults = q.faults[1:]
	}
	return mode
}

// Milliseconds turns a posted *_ms field into a duration, refusing a
// negative one; name is the field's JSON name, for the error.
func Milliseconds(name string, ms int) (time.Duration, error) {
	if ms < 0 {
		return 0, fmt.Errorf("%s must not be negative", name)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
