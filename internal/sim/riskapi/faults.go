package riskapi

import (
	"fmt"
	"net/http"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// CreateMode is a fault applied to one POST /reviews.
type CreateMode string

// Create faults. "Before commit" modes leave no review; "after commit"
// modes leave exactly one (or reuse the key's existing one).
const (
	// CreateDropResponseAfterCommit ("drop_response_after_commit") commits,
	// then closes the connection without a response (the client sees EOF or
	// a reset).
	CreateDropResponseAfterCommit CreateMode = simhttp.DropResponseAfterCommit
	// CreateTimeoutBeforeCommit ("timeout_before_commit") commits nothing
	// and holds the request until the client goes away (or the hold limit,
	// then 504).
	CreateTimeoutBeforeCommit CreateMode = simhttp.TimeoutBeforeCommit
	// CreateError500BeforeCommit ("error_500_before_commit") answers 500
	// without committing.
	CreateError500BeforeCommit CreateMode = simhttp.Error500BeforeCommit
	// CreateError500AfterCommit ("error_500_after_commit") commits, then
	// answers 500.
	CreateError500AfterCommit CreateMode = simhttp.Error500AfterCommit
	// CreateReject ("reject") answers 422 {"error":"rejected"} without
	// committing.
	CreateReject CreateMode = simhttp.Reject
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
type CreateFault = simhttp.Fault[CreateMode]

// LookupFault applies Mode to the next Times lookups.
type LookupFault = simhttp.Fault[LookupMode]

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
	createQueue, err := simhttp.NewQueue(f.Create,
		CreateDropResponseAfterCommit, CreateTimeoutBeforeCommit,
		CreateError500BeforeCommit, CreateError500AfterCommit, CreateReject)
	if err != nil {
		return fmt.Errorf("create faults: %w", err)
	}
	lookupQueue, err := simhttp.NewQueue(f.Lookup, LookupTimeout, LookupError500)
	if err != nil {
		return fmt.Errorf("lookup faults: %w", err)
	}
	latency, err := simhttp.Milliseconds("latency_ms", f.LatencyMS)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createFaults = createQueue
	s.lookupFaults = lookupQueue
	s.latency = latency
	return nil
}

// faultsRequest is the body of POST /_sim/faults.
type faultsRequest struct {
	Faults
	simhttp.ReplaceFlag
}

func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var req faultsRequest
	simhttp.ServeSetFaults(w, r, &req, &req.ReplaceFlag, &req.Faults, s.SetFaults)
}
