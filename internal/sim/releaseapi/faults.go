package releaseapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// CreateMode is a fault applied to one POST /tickets.
type CreateMode string

// Create faults. The first four are the contract's; error_500_after_commit
// and reject exist so tests can also cover a 5xx with an effect and a
// proven business rejection against this provider.
const (
	// CreateDropResponseAfterCommit commits one ticket, then closes the
	// connection without a response.
	CreateDropResponseAfterCommit CreateMode = "drop_response_after_commit"
	// CreateTimeoutBeforeCommit commits nothing and holds the request until
	// the client goes away (or the hold limit, then 504).
	CreateTimeoutBeforeCommit CreateMode = "timeout_before_commit"
	// CreateError500BeforeCommit answers 500 without committing.
	CreateError500BeforeCommit CreateMode = "error_500_before_commit"
	// CreateDuplicateThenDrop commits TWO tickets for the target, then
	// drops the response: the incident a reconciler must escalate.
	CreateDuplicateThenDrop CreateMode = "duplicate_then_drop"
	// CreateError500AfterCommit commits one ticket, then answers 500.
	CreateError500AfterCommit CreateMode = "error_500_after_commit"
	// CreateReject answers 422 {"error":"rejected"} without committing.
	CreateReject CreateMode = "reject"
)

// SearchMode is a fault applied to one GET /tickets search.
type SearchMode string

// Search faults.
const (
	// SearchHide answers 200 with no tickets and "complete": false, as a
	// search does when it omits what the caller may not see.
	SearchHide SearchMode = "hide"
	// SearchTimeout holds the request until the client goes away.
	SearchTimeout SearchMode = "timeout"
)

// CreateFault applies Mode to the next Times creates.
type CreateFault struct {
	Mode  CreateMode `json:"mode"`
	Times int        `json:"times"`
}

// SearchFault applies Mode to the next Times searches.
type SearchFault struct {
	Mode  SearchMode `json:"mode"`
	Times int        `json:"times"`
}

// Faults is the body of POST /_sim/faults. Setting faults replaces the
// queues, the lag and the latency; it never appends.
type Faults struct {
	Create []CreateFault `json:"create,omitempty"`
	Search []SearchFault `json:"search,omitempty"`
	// SearchLagMS sets the index lag; nil restores Config.SearchLag.
	SearchLagMS *int `json:"search_lag_ms,omitempty"`
	// LatencyMS delays every non-/_sim request before it is handled,
	// regardless of whether the client is still waiting.
	LatencyMS int `json:"latency_ms,omitempty"`
}

// SetFaults replaces the fault queues, lag and latency. Invalid modes or
// counts are refused and leave the current faults in place.
func (s *Server) SetFaults(f Faults) error {
	create := make([]simhttp.QueueEntry, 0, len(f.Create))
	for _, c := range f.Create {
		create = append(create, simhttp.QueueEntry{Mode: string(c.Mode), Times: c.Times})
	}
	createQueue, err := simhttp.NewQueue(create,
		string(CreateDropResponseAfterCommit), string(CreateTimeoutBeforeCommit),
		string(CreateError500BeforeCommit), string(CreateDuplicateThenDrop),
		string(CreateError500AfterCommit), string(CreateReject))
	if err != nil {
		return fmt.Errorf("create faults: %w", err)
	}
	search := make([]simhttp.QueueEntry, 0, len(f.Search))
	for _, sf := range f.Search {
		search = append(search, simhttp.QueueEntry{Mode: string(sf.Mode), Times: sf.Times})
	}
	searchQueue, err := simhttp.NewQueue(search, string(SearchHide), string(SearchTimeout))
	if err != nil {
		return fmt.Errorf("search faults: %w", err)
	}
	lag := s.defaultLag
	if f.SearchLagMS != nil {
		if *f.SearchLagMS < 0 {
			return errors.New("search_lag_ms must not be negative")
		}
		lag = time.Duration(*f.SearchLagMS) * time.Millisecond
	}
	if f.LatencyMS < 0 {
		return errors.New("latency_ms must not be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createFaults = createQueue
	s.searchFaults = searchQueue
	s.searchLag = lag
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
