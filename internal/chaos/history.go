package chaos

import (
	"sync"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// Call is one tool call an agent or the operator made and what it heard.
type Call struct {
	Seq     int
	Cell    int
	Plan    int    // the planned operation it belongs to (-1: none)
	Persona string // ALICE, BOB, DEPLOYER, OPERATOR
	Replica int
	Tool    string
	Args    map[string]any
	// OperationID is the operation_id sent (empty for reads by handle).
	OperationID string
	// ArgsChanged: the same operation_id with other arguments than its
	// first use (the answer must be a conflict).
	ArgsChanged bool
	Start, End  time.Time
	// TransportError is set when no tool result arrived (connection
	// refused, cancelled, 5xx from a stopped replica).
	TransportError string
	Cancelled      bool
	IsError        bool
	Code           string
	Status         string
	Outcome        string
	Handle         string // review_id, ticket_handle or handle in the answer
	ResourceID     string
	Deduplicated   bool
	RetryAllowed   bool
}

// Answered reports whether the call got a tool result.
func (c Call) Answered() bool { return c.TransportError == "" }

// Fault is one injected fault.
type Fault struct {
	Seq    int
	Cell   int
	Kind   string
	Detail string
	Handle string // the operation it was aimed at, when known
	At     time.Time
}

// Snapshot is an operation read back from the table.
type Snapshot struct {
	Seq int
	At  time.Time
	Op  operation.Operation
}

// Recorder collects the history of a campaign; safe for concurrent use.
type Recorder struct {
	mu        sync.Mutex
	seq       int
	calls     []Call
	faults    []Fault
	snapshots map[string][]Snapshot // by handle
}

// NewRecorder returns an empty history.
func NewRecorder() *Recorder { return &Recorder{snapshots: map[string][]Snapshot{}} }

// Call records a call and returns its sequence number.
func (r *Recorder) Call(c Call) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	c.Seq = r.seq
	r.calls = append(r.calls, c)
	return c.Seq
}

// Fault records an injected fault.
func (r *Recorder) Fault(cell int, kind, detail, handle string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	r.faults = append(r.faults, Fault{Seq: r.seq, Cell: cell, Kind: kind, Detail: detail, Handle: handle, At: time.Now()})
}

// Snapshot records an operation read from the table.
func (r *Recorder) Snapshot(op operation.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	r.snapshots[op.Handle] = append(r.snapshots[op.Handle], Snapshot{Seq: r.seq, At: time.Now(), Op: op})
}

// History is a copy of everything recorded.
type History struct {
	Calls     []Call
	Faults    []Fault
	Snapshots map[string][]Snapshot
}

// History returns a copy of the record.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := History{
		Calls:     append([]Call(nil), r.calls...),
		Faults:    append([]Fault(nil), r.faults...),
		Snapshots: make(map[string][]Snapshot, len(r.snapshots)),
	}
	for k, v := range r.snapshots {
		h.Snapshots[k] = append([]Snapshot(nil), v...)
	}
	return h
}
