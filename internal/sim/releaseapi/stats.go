package releaseapi

import (
	"fmt"
	"maps"
	"time"
)

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

// Origin is how a ticket came to be: the create that made it, as this
// simulator saw it. A fault campaign prints it beside a business key with
// more than one ticket, so a second ticket can be told apart as the
// simulator's broken promise or the server's second create.
type Origin struct {
	// Fault is the create mode the create drew ("" for none).
	Fault CreateMode
	// Arrived is the provider's clock when the create arrived;
	// CommitDeadline the bound it carried (nil: none).
	Arrived        time.Time
	CommitDeadline *time.Time
	// Broken: the ticket broke the simulator's promise (a late commit past
	// its deadline, duplicate_then_drop's second ticket).
	Broken bool
	// AfterTicket is the ticket whose commit released this one
	// (commit_on_resend) or that it duplicates (duplicate_then_drop).
	AfterTicket string
}

// String is one line for a report.
func (o Origin) String() string {
	fault := string(o.Fault)
	if fault == "" {
		fault = "no fault"
	}
	out := fmt.Sprintf("%s, arrived %s", fault, o.Arrived.Format("15:04:05.000"))
	if o.CommitDeadline != nil {
		out += ", deadline " + o.CommitDeadline.UTC().Format("15:04:05.000")
	}
	if o.AfterTicket != "" {
		out += ", after " + o.AfterTicket
	}
	if o.Broken {
		out += ", promise broken"
	}
	return out
}

// Origins returns the provenance of every ticket committed since the
// last Reset, by ticket id; late commits that are due are committed first.
func (s *Server) Origins() map[string]Origin {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.materializeLocked()
	return maps.Clone(s.origins)
}
