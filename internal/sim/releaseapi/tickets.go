package releaseapi

import (
	"fmt"
	"net/http"
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
}

type searchResponse struct {
	Tickets        []Ticket `json:"tickets"`
	IndexedThrough string   `json:"indexed_through"`
	Complete       bool     `json:"complete"`
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
	fault := s.createFaults.Next()
	s.mu.Unlock()
	if simhttp.FailBeforeCommit(w, r, string(fault), s.holdLimit, "ticket rejected by release policy (simulated)") {
		return
	}

	ticket := s.commit(req)
	if fault == CreateDuplicateThenDrop {
		s.commit(req)
		fault = CreateDropResponseAfterCommit // and the answer is lost as for one
	}
	if simhttp.FailAfterCommit(w, string(fault)) {
		return
	}
	simhttp.WriteJSON(w, http.StatusCreated, ticket)
}

// commit creates a ticket. There is deliberately no dedupe of any kind.
func (s *Server) commit(req createRequest) Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastNumber++
	t := Ticket{
		TicketID:    fmt.Sprintf("ticket-%d", s.lastNumber),
		Service:     req.Service,
		Commit:      req.Commit,
		Environment: req.Environment,
		RequestedBy: req.RequestedBy,
		Status:      "OPEN",
		CreatedAt:   s.clock().UTC(),
	}
	s.tickets = append(s.tickets, t)
	s.counters.TicketsCommitted++
	s.counters.TicketsByTarget[t.Target()]++
	return t
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.arrive(&s.counters.GetCalls)

	id := r.PathValue("id")
	s.mu.Lock()
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
	s.mu.Lock()
	s.counters.SearchCalls++
	latency := s.latency
	fault := s.searchFaults.Next()
	s.mu.Unlock()
	simhttp.Pause(latency)

	if fault == SearchTimeout {
		if !simhttp.Hold(r.Context(), s.holdLimit) {
			simhttp.WriteError(w, http.StatusGatewayTimeout, "timeout", "simulated search timeout")
		}
		return
	}

	q := r.URL.Query()
	service, commit, environment := q.Get("service"), q.Get("commit"), q.Get("environment")

	s.mu.Lock()
	indexedThrough := s.clock().UTC().Add(-s.searchLag)
	resp := searchResponse{
		Tickets:        []Ticket{},
		IndexedThrough: indexedThrough.Format(time.RFC3339Nano),
		Complete:       fault != SearchHide,
	}
	if resp.Complete {
		for _, t := range s.tickets {
			if t.CreatedAt.After(indexedThrough) {
				continue // not indexed yet
			}
			if matches(service, t.Service) && matches(commit, t.Commit) && matches(environment, t.Environment) {
				resp.Tickets = append(resp.Tickets, t)
			}
		}
	}
	s.mu.Unlock()
	simhttp.WriteJSON(w, http.StatusOK, resp)
}

func matches(filter, value string) bool {
	return filter == "" || filter == value
}
