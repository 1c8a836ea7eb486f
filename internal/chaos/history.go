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
	Persona string // ALICE, CAROL, BOB, DEPLOYER, OPERATOR
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
	Message        string // an error answer's message, for the report
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

// Burst is one burst of concurrent writes at a replica (Config.Burst) and
// the hold the campaign put on their inserts in that replica's store
// transport: an admitted burst call holds its gate slot while its insert
// is held, so the holds show what the gate let in at once (invariant 7).
type Burst struct {
	Cell    int
	Plan    int
	Replica int
	// OperationID is the plan's; burst call k sends "<OperationID>-burst-<k>".
	OperationID string
	Size        int
	Calls       []int  // Seq of each burst call
	Holds       []Hold // every insert of a burst call the hold caught
	// Released is when the hold was lifted (zero: nothing was held, the
	// replica was down when the burst began).
	Released time.Time
	// Complete: the hold was lifted only once every burst call had been
	// answered or had its insert held, so no burst call reached its
	// insert after the release.
	Complete bool
}

// Hold is one burst insert held in a replica process's store transport,
// from when it arrived to when it was let go (released, or its context
// ended first: then it was never sent). To is zero when the process was
// still holding it when the burst was recorded.
type Hold struct {
	Process  string // the replica process, "replica-<idx>.<restarts>"
	Handle   string
	From, To time.Time
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
	bursts    []Burst
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

// Burst records a burst once its calls have all returned.
func (r *Recorder) Burst(b Burst) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bursts = append(r.bursts, b)
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
	Bursts    []Burst
	Snapshots map[string][]Snapshot
}

// History returns a copy of the record.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := History{
		Calls:     append([]Call(nil), r.calls...),
		Faults:    append([]Fault(nil), r.faults...),
		Bursts:    append([]Burst(nil), r.bursts...),
		Snapshots: make(map[string][]Snapshot, len(r.snapshots)),
	}
	for k, v := range r.snapshots {
		h.Snapshots[k] = append([]Snapshot(nil), v...)
	}
	return h
}
