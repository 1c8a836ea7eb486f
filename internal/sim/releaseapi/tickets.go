package releaseapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// Ticket is a deployment ticket as the Release API returns it.
type Ticket struct {
	TicketID    string    `json:"ticket_id"`
	Service     string    `json:"service"`
	Commit      string    `json:"commit"`
	Environment string    `json:"environment"`
	RequestedBy string    `json:"requested_by"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// Target is the key tickets are counted by in Stats: "service/commit/environment".
func (t Ticket) Target() string {
	return t.Service + "/" + t.Commit + "/" + t.Environment
}

type createRequest struct {
	Service     string `json:"service"`
	Commit      string `json:"commit"`
	Environment string `json:"environment"`
	RequestedBy string `json:"requested_by"`
	// CommitDeadline is the caller's bound on late commits: the provider
	// never commits this create after it (by the provider's own clock) and
	// answers 422 commit_deadline_passed instead. Optional: without it the
	// provider promises nothing.
	CommitDeadline *time.Time `json:"commit_deadline,omitempty"`

	// arrived is the provider's clock when the create arrived; fault is
	// the create mode it drew (empty: none). Neither is on the wire: they
	// are the ticket's provenance (Origin).
	arrived time.Time
	fault   CreateMode
}

type searchResponse struct {
	Tickets        []Ticket `json:"tickets"`
	IndexedThrough string   `json:"indexed_through"`
	Complete       bool     `json:"complete"`
	// SearchedAt is the provider's clock when it answered, so a caller can
	// bound the skew between its clock and the provider's.
	SearchedAt string `json:"searched_at"`
}

// CodeCommitDeadlinePassed is the error code of a create refused because
// its commit deadline had passed by the provider's clock: nothing committed.
const CodeCommitDeadlinePassed = "commit_deadline_passed"

// deadlinePassedBody is the 422 answer to a create past its deadline.
type deadlinePassedBody struct {
	Error        string `json:"error"`
	Message      string `json:"message"`
	ProviderTime string `json:"provider_time"`
}

// lateCommit is a create a late-commit fault will commit at At.
type lateCommit struct {
	req createRequest
	at  time.Time
	// broken: it lands past the create's commit deadline.
	broken bool
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.arrive(&s.counters.CreateCalls)

	var req createRequest
	if err := simhttp.DecodeJSON(r, &req); err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	for name, v := range map[string]string{"service": req.Service, "commit": req.Commit, "environment": req.Environment, "requested_by": req.RequestedBy} {
		if strings.TrimSpace(v) == "" {
			simhttp.WriteError(w, http.StatusBadRequest, "invalid_request", name+" is required")
			return
		}
	}

	s.mu.Lock()
	target := req.Service + "/" + req.Commit + "/" + req.Environment
	var fault CreateMode
	if aim, aimed := s.createForTarget[target]; aimed {
		fault = aim.mode
		if aim.left--; aim.left > 0 {
			s.createForTarget[target] = aim
		} else {
			delete(s.createForTarget, target)
		}
	} else {
		fault = s.createFaults.Next()
	}
	overrun := s.lateOverrun
	req.arrived, req.fault = s.clock().UTC(), fault
	s.mu.Unlock()
	if fault == CreateCommitOnResend {
		s.mu.Lock()
		s.onResend = append(s.onResend, req)
		s.counters.LateCommitsScheduled++
		s.mu.Unlock()
		if !simhttp.Hold(r.Context(), s.holdLimit) {
			simhttp.WriteError(w, http.StatusGatewayTimeout, "timeout", "simulated timeout; the create will commit when it is sent again")
		}
		return
	}
	if fault == CreateCommitLateWithinDeadline || fault == CreateCommitLateBeyondDeadline {
		s.scheduleLateCommit(req, fault, overrun)
		// The caller never hears back: its wait ends, the commit comes later.
		if !simhttp.Hold(r.Context(), s.holdLimit) {
			simhttp.WriteError(w, http.StatusGatewayTimeout, "timeout", "simulated timeout; the create will commit late")
		}
		return
	}
	if simhttp.FailBeforeCommit(w, r, string(fault), s.holdLimit, "ticket rejected by release policy (simulated)") {
		return
	}

	ticket, ok := s.commitByDeadline(req)
	if !ok {
		s.mu.Lock()
		now := s.clock().UTC()
		s.counters.CreatesPastDeadline++
		s.mu.Unlock()
		simhttp.WriteJSON(w, http.StatusUnprocessableEntity, deadlinePassedBody{
			Error: CodeCommitDeadlinePassed, Message: "commit deadline passed; nothing was committed",
			ProviderTime: now.Format(time.RFC3339Nano),
		})
		return
	}
	s.commitHeldForResend(ticket)
	if fault == CreateDuplicateThenDrop {
		extra := s.commitDuplicate(req, ticket)
		s.mu.Lock()
		s.counters.BrokenPromisesByTarget[extra.Target()]++
		s.mu.Unlock()
		fault = CreateDropResponseAfterCommit // and the answer is lost as for one
	}
	if simhttp.FailAfterCommit(w, string(fault)) {
		return
	}
	simhttp.WriteJSON(w, http.StatusCreated, ticket)
}

// commitByDeadline commits req unless its commit deadline has passed by
// this provider's clock: the promise the deadline asks for.
func (s *Server) commitByDeadline(req createRequest) (Ticket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.materializeLocked()
	if req.CommitDeadline != nil && s.clock().After(*req.CommitDeadline) {
		return Ticket{}, false
	}
	return s.commitLocked(req, s.clock().UTC(), Origin{}), true
}

// commitHeldForResend commits every create commit_on_resend held for the
// target of the ticket just made, right after it.
func (s *Server) commitHeldForResend(made Ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.onResend[:0]
	for _, held := range s.onResend {
		if held.Service != made.Service || held.Commit != made.Commit || held.Environment != made.Environment {
			kept = append(kept, held)
			continue
		}
		now := s.clock()
		broken := held.CommitDeadline != nil && now.After(*held.CommitDeadline)
		t := s.commitLocked(held, now.UTC(), Origin{Broken: broken, AfterTicket: made.TicketID})
		if broken {
			s.counters.BrokenPromisesByTarget[t.Target()]++
		}
	}
	s.onResend = kept
}

// commitDuplicate creates duplicate_then_drop's second ticket for the
// create that made first. There is deliberately no dedupe of any kind.
func (s *Server) commitDuplicate(req createRequest, first Ticket) Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.materializeLocked()
	return s.commitLocked(req, s.clock().UTC(), Origin{Broken: true, AfterTicket: first.TicketID})
}

// scheduleLateCommit queues req to commit later: at its commit deadline
// (the latest instant the promise allows) for the within-deadline fault,
// overrun past it for the fault that breaks the promise. A create without a
// deadline commits LateCommitDelay after it arrived (plus overrun).
func (s *Server) scheduleLateCommit(req createRequest, fault CreateMode, overrun time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.clock().Add(LateCommitDelay)
	if req.CommitDeadline != nil {
		at = *req.CommitDeadline
	}
	broken := fault == CreateCommitLateBeyondDeadline && req.CommitDeadline != nil && overrun > 0
	if fault == CreateCommitLateBeyondDeadline {
		at = at.Add(overrun)
	}
	s.lateCommits = append(s.lateCommits, lateCommit{req: req, at: at, broken: broken})
	s.counters.LateCommitsScheduled++
}

// materializeLocked commits every queued late create whose time has come,
// stamped with that time. Every observation (read, search, create, stats)
// calls it first, so a late commit is indistinguishable from one a
// background worker made on time, and a test clock fully controls it.
func (s *Server) materializeLocked() {
	now := s.clock()
	kept := s.lateCommits[:0]
	var due []lateCommit
	for _, lc := range s.lateCommits {
		if lc.at.After(now) {
			kept = append(kept, lc)
		} else {
			due = append(due, lc)
		}
	}
	s.lateCommits = kept
	slices.SortStableFunc(due, func(a, b lateCommit) int { return a.at.Compare(b.at) })
	for _, lc := range due {
		t := s.commitLocked(lc.req, lc.at.UTC(), Origin{Broken: lc.broken})
		if lc.broken {
			s.counters.BrokenPromisesByTarget[t.Target()]++
		}
	}
}

func (s *Server) commitLocked(req createRequest, at time.Time, origin Origin) Ticket {
	s.lastNumber++
	t := Ticket{
		TicketID:    fmt.Sprintf("ticket-%d", s.lastNumber),
		Service:     req.Service,
		Commit:      req.Commit,
		Environment: req.Environment,
		RequestedBy: req.RequestedBy,
		Status:      "OPEN",
		CreatedAt:   at,
	}
	s.tickets = append(s.tickets, t)
	origin.Fault, origin.Arrived, origin.CommitDeadline = req.fault, req.arrived, req.CommitDeadline
	s.origins[t.TicketID] = origin
	s.counters.TicketsCommitted++
	s.counters.TicketsByTarget[t.Target()]++
	return t
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.arrive(&s.counters.GetCalls)

	id := r.PathValue("id")
	s.mu.Lock()
	s.materializeLocked()
	var found *Ticket
	for i := range s.tickets {
		if s.tickets[i].TicketID == id {
			t := s.tickets[i]
			found = &t
			break
		}
	}
	s.mu.Unlock()
	if found == nil {
		simhttp.WriteError(w, http.StatusNotFound, "ticket_not_found", "no ticket "+id)
		return
	}
	simhttp.WriteJSON(w, http.StatusOK, *found)
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target := q.Get("service") + "/" + q.Get("commit") + "/" + q.Get("environment")
	s.mu.Lock()
	s.counters.SearchCalls++
	latency := s.latency
	fault, aimed := s.searchForTarget[target]
	if aimed {
		delete(s.searchForTarget, target)
	} else {
		fault = s.searchFaults.Next()
	}
	s.mu.Unlock()
	simhttp.Pause(latency)

	if fault == SearchTimeout {
		if !simhttp.Hold(r.Context(), s.holdLimit) {
			simhttp.WriteError(w, http.StatusGatewayTimeout, "timeout", "simulated search timeout")
		}
		return
	}

	service, commit, environment := q.Get("service"), q.Get("commit"), q.Get("environment")

	s.mu.Lock()
	s.materializeLocked()
	now := s.clock().UTC()
	indexedThrough := now.Add(-s.searchLag)
	resp := searchResponse{
		Tickets:        []Ticket{},
		IndexedThrough: indexedThrough.Format(time.RFC3339Nano),
		Complete:       fault != SearchHide && fault != SearchPartial,
		SearchedAt:     now.Format(time.RFC3339Nano),
	}
	if fault != SearchHide {
		for _, t := range s.tickets {
			if t.CreatedAt.After(indexedThrough) {
				continue // not indexed yet
			}
			if matches(service, t.Service) && matches(commit, t.Commit) && matches(environment, t.Environment) {
				resp.Tickets = append(resp.Tickets, t)
			}
		}
		switch {
		case fault == SearchPartial && aimed && len(resp.Tickets) < 2:
			// Aimed at a target to hide one of its tickets, it waits for a
			// search that sees two (the index may lag the creates).
			s.searchForTarget[target] = SearchPartial
			resp.Complete = true
		case fault == SearchPartial && len(resp.Tickets) > 0:
			resp.Tickets = resp.Tickets[:len(resp.Tickets)-1]
		}
	}
	s.mu.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, resp)
}

func matches(filter, value string) bool {
	return filter == "" || filter == value
}
