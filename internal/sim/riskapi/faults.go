package riskapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// CreateMode is a fault applied to one POST /reviews.
type CreateMode string

// Create faults. "Before commit" modes leave no review; "after commit"
// modes leave exactly one (or reuse the key's existing one).
const (
	// CreateDropResponseAfterCommit commits, then closes the connection
	// without a response (the client sees EOF or a reset).
	CreateDropResponseAfterCommit CreateMode = "drop_response_after_commit"
	// CreateTimeoutBeforeCommit commits nothing and holds the request until
	// the client goes away (or the hold limit, then 504).
	CreateTimeoutBeforeCommit CreateMode = "timeout_before_commit"
	// CreateError500BeforeCommit answers 500 without committing.
	CreateError500BeforeCommit CreateMode = "error_500_before_commit"
	// CreateError500AfterCommit commits, then answers 500.
	CreateError500AfterCommit CreateMode = "error_500_after_commit"
	// CreateReject answers 422 {"error":"rejected"} without committing.
	CreateReject CreateMode = "reject"
)

// LookupMode is a fault applied to one GET /reviews?request_key=.
type LookupMode string

// Lookup faults.
const (
	// LookupTimeout holds the request until the client goes away.
	LookupTimeout LookupMode = "timeout"
	// LookupError500 answers 500.
	LookupError500 LookupMode = "error_500"
)

// CreateFault applies Mode to the next Times creates.
type CreateFault struct {
	Mode  CreateMode `json:"mode"`
	Times int        `json:"times"`
}

// LookupFault applies Mode to the next Times lookups.
type LookupFault struct {
	Mode  LookupMode `json:"mode"`
	Times int        `json:"times"`
}

// Faults is the body of POST /_sim/faults. Setting faults replaces the
// queues and the latency; it never appends.
type Faults struct {
	Create []CreateFault `json:"create,omitempty"`
	Lookup []LookupFault `json:"lookup,omitempty"`
	// LatencyMS delays every non-/_sim request before it is handled. The
	// delay ignores the client: a create still commits after its caller
	// has given up, as a slow real provider would.
	LatencyMS int `json:"latency_ms,omitempty"`
}

// SetFaults replaces the fault queues and latency. Invalid modes or counts
// are refused and leave the current faults in place.
func (s *Server) SetFaults(f Faults) error {
	create := make([]simhttp.QueueEntry, 0, len(f.Create))
	for _, c := range f.Create {
		create = append(create, simhttp.QueueEntry{Mode: string(c.Mode), Times: c.Times})
	}
	createQueue, err := simhttp.NewQueue(create,
		string(CreateDropResponseAfterCommit), string(CreateTimeoutBeforeCommit),
		string(CreateError500BeforeCommit), string(CreateError500AfterCommit), string(CreateReject))
	if err != nil {
		return fmt.Errorf("create faults: %w", err)
	}
	lookup := make([]simhttp.QueueEntry, 0, len(f.Lookup))
	for _, l := range f.Lookup {
		lookup = append(lookup, simhttp.QueueEntry{Mode: string(l.Mode), Times: l.Times})
	}
	lookupQueue, err := simhttp.NewQueue(lookup, string(LookupTimeout), string(LookupError500))
	if err != nil {
		return fmt.Errorf("lookup faults: %w", err)
	}
	if f.LatencyMS < 0 {
		return errors.New("latency_ms must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createFaults = createQueue
	s.lookupFaults = lookupQueue
	s.latency = time.Duration(f.LatencyMS) * time.Millisecond
	return nil
}

// faultsRequest accepts an optional "replace": true for callers that state
// the (only) semantics explicitly; false is refused rather than ignored.
type faultsRequest struct {
	Faults
	Replace *bool `json:"replace,omitempty"`
}

func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var req faultsRequest
	if err := simhttp.DecodeJSON(r, &req); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_faults", err.Error())
		return
	}
	if req.Replace != nil && !*req.Replace {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_faults", "appending faults is not supported; posting replaces them")
		return
	}
	if err := s.SetFaults(req.Faults); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_faults", err.Error())
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, req.Faults)
}
