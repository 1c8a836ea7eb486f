package releaseapi

import "maps"

// Stats is what GET /_sim/stats reports. Counters start at zero on Reset.
type Stats struct {
	// CreateCalls counts authenticated POST /tickets, whatever their outcome.
	CreateCalls int `json:"create_calls"`
	// TicketsCommitted counts tickets actually created (duplicate_then_drop
	// adds two).
	TicketsCommitted int `json:"tickets_committed"`
	// TicketsByTarget is keyed "service/commit/environment".
	TicketsByTarget map[string]int `json:"tickets_by_target"`
	// BrokenPromisesByTarget counts, per target, the tickets this
	// simulator made by breaking its promises: the second ticket of a
	// duplicate_then_drop create, and a commit_late_beyond_deadline commit
	// landing past its deadline. They are the only extra tickets a caller
	// is excused for.
	BrokenPromisesByTarget map[string]int `json:"broken_promises_by_target"`
	// LateCommitsScheduled counts creates a late-commit fault queued.
	LateCommitsScheduled int `json:"late_commits_scheduled"`
	// CreatesPastDeadline counts creates refused with
	// commit_deadline_passed (nothing committed).
	CreatesPastDeadline int `json:"creates_past_deadline"`
	// SearchCalls counts authenticated GET /tickets searches.
	SearchCalls int `json:"search_calls"`
	// GetCalls counts authenticated GET /tickets/{id}.
	GetCalls int `json:"get_calls"`
	// MaxInFlight is the highest number of non-/_sim requests handled at
	// the same moment.
	MaxInFlight int `json:"max_in_flight"`
	// ForeignAuthorizationSeen is true once any request carried an
	// Authorization header.
	ForeignAuthorizationSeen bool `json:"foreign_authorization_seen"`
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	s.materializeLocked()
	snapshot := s.counters
	snapshot.TicketsByTarget = maps.Clone(s.counters.TicketsByTarget)
	snapshot.BrokenPromisesByTarget = maps.Clone(s.counters.BrokenPromisesByTarget)
	s.mu.Unlock()
	snapshot.MaxInFlight = s.traffic.MaxInFlight()
	snapshot.ForeignAuthorizationSeen = s.traffic.ForeignAuthorizationSeen()
	return snapshot
}
