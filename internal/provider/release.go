package provider

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Release API operation names, as they appear in Error.Op.
const (
	OpCreateTicket  = "release.create_ticket"
	OpGetTicket     = "release.get_ticket"
	OpSearchTickets = "release.search_tickets"
)

// ReleaseConfig configures a ReleaseClient; see ClientConfig for the fields.
type ReleaseConfig ClientConfig

// TicketTarget is a deployment ticket's intended effect, and its
// uniqueness: one ticket per service, commit and environment.
type TicketTarget struct {
	Service     string
	Commit      string
	Environment string
}

// TicketInput is what a ticket is created from.
type TicketInput struct {
	Service     string
	Commit      string
	Environment string
	RequestedBy string
	// CommitDeadline, when set, is sent with the create: the provider
	// promises never to commit it after this instant (by its own clock) and
	// answers CodeCommitDeadlinePassed instead. This bound on late commits
	// is what lets a search whose watermark is past it prove absence.
	CommitDeadline time.Time
}

// CodeCommitDeadlinePassed is the Release API's refusal of a create that
// arrived after its commit deadline: nothing was committed, so the error is
// ClassNotDispatched (proven no effect).
const CodeCommitDeadlinePassed = "commit_deadline_passed"

// Target is the input's intended effect.
func (in TicketInput) Target() TicketTarget {
	return TicketTarget{Service: in.Service, Commit: in.Commit, Environment: in.Environment}
}

// Ticket is a deployment ticket at the Release API.
type Ticket struct {
	TicketID    string
	Service     string
	Commit      string
	Environment string
	RequestedBy string
	Status      string
	CreatedAt   time.Time
}

// Target is the ticket's effect key.
func (t Ticket) Target() TicketTarget {
	return TicketTarget{Service: t.Service, Commit: t.Commit, Environment: t.Environment}
}

// SearchResult is one answer of the lagging search.
type SearchResult struct {
	// Tickets exactly matching the target that the index already holds.
	Tickets []Ticket
	// Complete is false when the provider withheld tickets (e.g. ones the
	// caller may not see), or answered with tickets for other targets (it
	// did not match as we asked, so ours may be missing from the answer):
	// then no answer, not even a match count, is authoritative.
	Complete bool
	// IndexedThrough is the watermark: every ticket created at or before it
	// is in the index.
	IndexedThrough time.Time
	// SearchedAt is the provider's clock when it answered (zero if the
	// provider did not say): lets the caller bound the clock skew.
	SearchedAt time.Time
}

// Covers reports whether this answer is authoritative for every ticket
// created at or before t: complete, and indexed through t. Only then does
// a zero-match answer prove absence.
func (r SearchResult) Covers(t time.Time) bool {
	return r.Complete && !r.IndexedThrough.Before(t)
}

// ReleaseClient calls the Release API. It is safe for concurrent use.
//
// The Release API has no idempotency: every CreateTicket that reaches it
// may create a ticket. Never call CreateTicket again after a ClassUnknown
// error without reconciling first (SearchTickets and SearchResult.Covers).
type ReleaseClient struct {
	endpoint *endpoint
}

// NewReleaseClient validates cfg and builds a client.
func NewReleaseClient(cfg ReleaseConfig) (*ReleaseClient, error) {
	ep, err := newEndpoint("release client", ClientConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &ReleaseClient{endpoint: ep}, nil
}

type ticketWire struct {
	TicketID    string    `json:"ticket_id"`
	Service     string    `json:"service"`
	Commit      string    `json:"commit"`
	Environment string    `json:"environment"`
	RequestedBy string    `json:"requested_by"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

func (w ticketWire) complete() bool {
	return w.TicketID != "" && w.Service != "" && w.Commit != "" && w.Environment != "" && !w.CreatedAt.IsZero()
}

func (w ticketWire) ticket() Ticket {
	return Ticket{
		TicketID: w.TicketID, Service: w.Service, Commit: w.Commit, Environment: w.Environment,
		RequestedBy: w.RequestedBy, Status: w.Status, CreatedAt: w.CreatedAt,
	}
}

func validTarget(op string, t TicketTarget) *Error {
	if blank := firstBlank([2]string{"service", t.Service}, [2]string{"commit", t.Commit}, [2]string{"environment", t.Environment}); blank != "" {
		return invalidInput(op, blank+" is required")
	}
	return nil
}

// CreateTicket creates a deployment ticket. There is no request key: the
// provider cannot deduplicate, so a ClassUnknown error must be reconciled
// by searching for in.Target(), never by calling CreateTicket again.
func (c *ReleaseClient) CreateTicket(ctx context.Context, in TicketInput) (Ticket, error) {
	const op = OpCreateTicket
	if err := validTarget(op, in.Target()); err != nil {
		return Ticket{}, err
	}
	if blank := firstBlank([2]string{"requested_by", in.RequestedBy}); blank != "" {
		return Ticket{}, invalidInput(op, blank+" is required")
	}
	body := map[string]string{
		"service":      in.Service,
		"commit":       in.Commit,
		"environment":  in.Environment,
		"requested_by": in.RequestedBy,
	}
	if !in.CommitDeadline.IsZero() {
		body["commit_deadline"] = in.CommitDeadline.UTC().Format(time.RFC3339Nano)
	}
	resp, err := c.endpoint.do(ctx, request{op: op, method: http.MethodPost, url: c.endpoint.url(nil, "tickets"), body: body})
	if err != nil {
		return Ticket{}, err
	}
	if resp.status != http.StatusCreated {
		e := statusError(op, resp, ClassRejected)
		if resp.status == http.StatusUnprocessableEntity && e.Code == CodeCommitDeadlinePassed && !in.CommitDeadline.IsZero() {
			// The provider kept its promise: this create never committed.
			e.Class = ClassNotDispatched
		}
		return Ticket{}, e
	}
	var w ticketWire
	if err := decodeSuccess(op, resp, &w); err != nil {
		return Ticket{}, err
	}
	if !w.complete() {
		return Ticket{}, mismatch(op, resp.status, "ticket is missing required fields")
	}
	if w.ticket().Target() != in.Target() {
		return Ticket{}, mismatch(op, resp.status, "ticket %s is not for the requested target", w.TicketID)
	}
	return w.ticket(), nil
}

// GetTicket is the authoritative read by id; ClassNotFound on 404.
func (c *ReleaseClient) GetTicket(ctx context.Context, ticketID string) (Ticket, error) {
	const op = OpGetTicket
	if err := pathID(op, "ticket_id", ticketID); err != nil {
		return Ticket{}, err
	}
	var w ticketWire
	if err := c.endpoint.getJSON(ctx, op, c.endpoint.url(nil, "tickets", ticketID), ClassNotFound, &w); err != nil {
		return Ticket{}, err
	}
	if !w.complete() || w.TicketID != ticketID {
		return Ticket{}, mismatch(op, http.StatusOK, "response is not ticket %s", ticketID)
	}
	return w.ticket(), nil
}

// SearchTickets searches for tickets with exactly this target. The answer
// is only as good as its watermark: check Covers before trusting a zero.
// Tickets the provider returns for other targets are dropped, so a fuzzy
// search never counts as a match, and they make the answer incomplete: a
// provider that matched otherwise than asked (an ignored filter answering
// with a page of everything, its own normalisation of the values) may have
// left ours out, so its zero must not prove absence either.
func (c *ReleaseClient) SearchTickets(ctx context.Context, target TicketTarget) (SearchResult, error) {
	const op = OpSearchTickets
	if err := validTarget(op, target); err != nil {
		return SearchResult{}, err
	}
	var body struct {
		Tickets        *[]ticketWire `json:"tickets"`
		IndexedThrough time.Time     `json:"indexed_through"`
		Complete       *bool         `json:"complete"`
		SearchedAt     time.Time     `json:"searched_at"`
	}
	// A 404 on a search is a missing route, not an absence: inconclusive.
	query := url.Values{"service": {target.Service}, "commit": {target.Commit}, "environment": {target.Environment}}
	if err := c.endpoint.getJSON(ctx, op, c.endpoint.url(query, "tickets"), ClassUnknown, &body); err != nil {
		return SearchResult{}, err
	}
	if body.Tickets == nil || body.Complete == nil || body.IndexedThrough.IsZero() {
		return SearchResult{}, mismatch(op, http.StatusOK, "search answer lacks tickets, complete or indexed_through")
	}
	result := SearchResult{Tickets: []Ticket{}, Complete: *body.Complete, IndexedThrough: body.IndexedThrough, SearchedAt: body.SearchedAt}
	for _, w := range *body.Tickets {
		if !w.complete() {
			return SearchResult{}, mismatch(op, http.StatusOK, "ticket is missing required fields")
		}
		if w.ticket().Target() == target {
			result.Tickets = append(result.Tickets, w.ticket())
		} else {
			result.Complete = false
		}
	}
	return result, nil
}
