package releaseapi

import (
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
	// CreateDropResponseAfterCommit ("drop_response_after_commit") commits
	// one ticket, then closes the connection without a response.
	CreateDropResponseAfterCommit CreateMode = simhttp.DropResponseAfterCommit
	// CreateTimeoutBeforeCommit ("timeout_before_commit") commits nothing
	// and holds the request until the client goes away (or the hold limit,
	// then 504).
	CreateTimeoutBeforeCommit CreateMode = simhttp.TimeoutBeforeCommit
	// CreateError500BeforeCommit ("error_500_before_commit") answers 500
	// without committing.
	CreateError500BeforeCommit CreateMode = simhttp.Error500BeforeCommit
	// CreateDuplicateThenDrop commits TWO tickets for the target, then
	// drops the response: the incident a reconciler must escalate.
	CreateDuplicateThenDrop CreateMode = "duplicate_then_drop"
	// CreateError500AfterCommit ("error_500_after_commit") commits one
	// ticket, then answers 500.
	CreateError500AfterCommit CreateMode = simhttp.Error500AfterCommit
	// CreateReject ("reject") answers 422 {"error":"rejected"} without
	// committing.
	CreateReject CreateMode = simhttp.Reject
	// CreateCommitLateWithinDeadline ("commit_late_within_deadline") never
	// answers (the caller's wait ends, as for a timeout) and commits the
	// ticket later, at the create's commit_deadline: the latest instant the
	// provider's promise allows. Without a deadline in the request it
	// commits LateCommitDelay after arrival (a provider that promises
	// nothing).
	CreateCommitLateWithinDeadline CreateMode = "commit_late_within_deadline"
	// CreateCommitLateBeyondDeadline ("commit_late_beyond_deadline") is the
	// same, but commits late_commit_overrun_ms (default
	// DefaultLateCommitOverrun) AFTER the deadline: the provider breaks its
	// promise. This is the fault the duplicate audit exists for.
	CreateCommitLateBeyondDeadline CreateMode = "commit_late_beyond_deadline"
	// CreateCommitOnResend ("commit_on_resend") never answers and stays
	// invisible to every search until the next create for the same target
	// arrives (the re-send after absence looked proven); it commits right
	// after that create's own ticket: two tickets, the second past its
	// deadline, found only by the duplicate audit. Without a next create it
	// never commits.
	CreateCommitOnResend CreateMode = "commit_on_resend"
)

// LateCommitDelay is when a late-commit fault commits a create that carries
// no commit deadline, counted from its arrival.
const LateCommitDelay = 30 * time.Second

// DefaultLateCommitOverrun is how far past its deadline
// commit_late_beyond_deadline commits when late_commit_overrun_ms is unset.
const DefaultLateCommitOverrun = 10 * time.Second

// SearchMode is a fault applied to one GET /tickets search.
type SearchMode string

// Search faults.
const (
	// SearchHide answers 200 with no tickets and "complete": false, as a
	// search does when it omits what the caller may not see.
	SearchHide SearchMode = "hide"
	// SearchTimeout holds the request until the client goes away.
	SearchTimeout SearchMode = "timeout"
	// SearchPartial answers 200 with every matching ticket but the newest,
	// and "complete": false: a lookup that may hide others.
	SearchPartial SearchMode = "partial"
)

// CreateFault applies Mode to the next Times creates.
type CreateFault = simhttp.Fault[CreateMode]

// SearchFault applies Mode to the next Times searches.
type SearchFault = simhttp.Fault[SearchMode]

// Faults is the body of POST /_sim/faults. Setting faults replaces the
// queues, the lag and the latency; it never appends.
type Faults struct {
	Create []CreateFault `json:"create,omitempty"`
	Search []SearchFault `json:"search,omitempty"`
	// SearchForTarget aims a search fault at one target
	// ("service/commit/environment"): the next search naming exactly it
	// gets the mode, before the search queue; an aimed partial waits for a
	// search that finds two tickets there, so that it hides one. Unlike the queues these are
	// added to the ones already set (each is about its own target, so
	// concurrent users do not take each other's), and each is used once.
	SearchForTarget map[string]SearchMode `json:"search_for_target,omitempty"`
	// CreateForTarget aims a create fault at one target the same way: the
	// next create for exactly it gets the mode, before the create queue.
	CreateForTarget map[string]CreateMode `json:"create_for_target,omitempty"`
	// CreateForTargetTimes is how many creates in a row for the target
	// draw its aimed mode (default 1): 2 aims it at a create and at the
	// re-send that follows it.
	CreateForTargetTimes map[string]int `json:"create_for_target_times,omitempty"`
	// DropSearchForTarget drops every aimed fault (search and create) not
	// used yet, before this call's aimed faults are added.
	DropSearchForTarget bool `json:"drop_search_for_target,omitempty"`
	// SearchLagMS sets the index lag; nil restores Config.SearchLag.
	SearchLagMS *int `json:"search_lag_ms,omitempty"`
	// LatencyMS delays every non-/_sim request before it is handled,
	// regardless of whether the client is still waiting. A create still
	// honours its commit deadline after the delay.
	LatencyMS int `json:"latency_ms,omitempty"`
	// LateCommitOverrunMS is how far past the deadline
	// commit_late_beyond_deadline commits; 0 means DefaultLateCommitOverrun.
	LateCommitOverrunMS int `json:"late_commit_overrun_ms,omitempty"`
}

// createModes are every create fault mode.
var createModes = []CreateMode{CreateDropResponseAfterCommit, CreateTimeoutBeforeCommit,
	CreateError500BeforeCommit, CreateDuplicateThenDrop,
	CreateError500AfterCommit, CreateReject,
	CreateCommitLateWithinDeadline, CreateCommitLateBeyondDeadline, CreateCommitOnResend}

// SetFaults replaces the fault queues, lag and latency. Invalid modes or
// counts are refused and leave the current faults in place.
func (s *Server) SetFaults(f Faults) error {
	createQueue, err := simhttp.NewQueue(f.Create, createModes...)
	if err != nil {
		return fmt.Errorf("create faults: %w", err)
	}
	searchQueue, err := simhttp.NewQueue(f.Search, SearchHide, SearchTimeout, SearchPartial)
	if err != nil {
		return fmt.Errorf("search faults: %w", err)
	}
	for target, mode := range f.SearchForTarget {
		if mode != SearchHide && mode != SearchTimeout && mode != SearchPartial {
			return fmt.Errorf("search_for_target %s: unknown mode %q", target, mode)
		}
	}
	for target, mode := range f.CreateForTarget {
		if _, err := simhttp.NewQueue([]CreateFault{{Mode: mode, Times: 1}}, createModes...); err != nil {
			return fmt.Errorf("create_for_target %s: %w", target, err)
		}
	}
	for target, n := range f.CreateForTargetTimes {
		if _, aimed := f.CreateForTarget[target]; !aimed || n < 1 {
			return fmt.Errorf("create_for_target_times %s: must be positive and name a target of create_for_target, got %d", target, n)
		}
	}
	lag := s.defaultLag
	if f.SearchLagMS != nil {
		if lag, err = simhttp.Milliseconds("search_lag_ms", *f.SearchLagMS); err != nil {
			return err
		}
	}
	latency, err := simhttp.Milliseconds("latency_ms", f.LatencyMS)
	if err != nil {
		return err
	}
	overrun, err := simhttp.Milliseconds("late_commit_overrun_ms", f.LateCommitOverrunMS)
	if err != nil {
		return err
	}
	if overrun == 0 {
		overrun = DefaultLateCommitOverrun
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createFaults = createQueue
	s.searchFaults = searchQueue
	if f.DropSearchForTarget {
		clear(s.searchForTarget)
		clear(s.createForTarget)
	}
	for target, mode := range f.SearchForTarget {
		s.searchForTarget[target] = mode
	}
	for target, mode := range f.CreateForTarget {
		s.createForTarget[target] = aimedCreate{mode: mode, left: max(1, f.CreateForTargetTimes[target])}
	}
	s.searchLag = lag
	s.latency = latency
	s.lateOverrun = overrun
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
