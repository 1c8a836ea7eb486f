package releaseapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// DefaultHoldLimit is how long a "timeout" fault holds a request whose
// client never goes away.
const DefaultHoldLimit = 60 * time.Second

// firstTicketNumber makes the first ticket "ticket-9001".
const firstTicketNumber = 9000

// Config configures a simulated Release API.
type Config struct {
	// APIKey is the service key every non-/_sim request must present in
	// X-Api-Key. An empty key accepts no request.
	APIKey string
	// Clock stamps created_at and drives the search watermark; time.Now
	// when nil. A test clock makes lag deterministic.
	Clock func() time.Time
	// SearchLag is the index lag after New and Reset, and whenever posted
	// faults omit search_lag_ms.
	SearchLag time.Duration
	// HoldLimit bounds timeout faults; DefaultHoldLimit when zero.
	HoldLimit time.Duration
}

// Server is the simulated Release API. It implements http.Handler; all
// state lives in the struct behind one mutex.
type Server struct {
	apiKey       string
	clock        func() time.Time
	defaultLag   time.Duration
	holdLimit    time.Duration
	handler      http.Handler
	inFlight     simhttp.InFlight
	mu           sync.Mutex
	tickets      []Ticket // in creation order
	lastNumber   int      // keeps counting across resets
	createFaults simhttp.Queue
	searchFaults simhttp.Queue
	searchLag    time.Duration
	latency      time.Duration
	counters     Stats
}

// New returns an empty Release API simulator.
func New(cfg Config) *Server {
	s := &Server{
		apiKey:     cfg.APIKey,
		clock:      cfg.Clock,
		defaultLag: cfg.SearchLag,
		holdLimit:  cfg.HoldLimit,
		lastNumber: firstTicketNumber,
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.holdLimit <= 0 {
		s.holdLimit = DefaultHoldLimit
	}
	if s.defaultLag < 0 {
		s.defaultLag = 0
	}
	s.resetLocked()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", s.handleCreate)
	mux.HandleFunc("GET /tickets", s.handleSearch)
	mux.HandleFunc("GET /tickets/{id}", s.handleGet)
	mux.HandleFunc("POST /_sim/faults", s.handleSetFaults)
	mux.HandleFunc("GET /_sim/stats", s.handleStats)
	mux.HandleFunc("POST /_sim/reset", s.handleReset)
	s.handler = simhttp.Guard(s.apiKey, &s.inFlight, s.noteForeignAuthorization, mux)
	return s
}

// ServeHTTP serves the Release API and its /_sim/ control endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// Reset clears tickets, faults and counters and restores the configured
// search lag. Ticket numbers keep counting up across resets.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	s.inFlight.Reset()
}

func (s *Server) resetLocked() {
	s.tickets = nil
	s.createFaults = simhttp.Queue{}
	s.searchFaults = simhttp.Queue{}
	s.searchLag = s.defaultLag
	s.latency = 0
	s.counters = Stats{TicketsByTarget: make(map[string]int)}
}

func (s *Server) noteForeignAuthorization() {
	s.mu.Lock()
	s.counters.ForeignAuthorizationSeen = true
	s.mu.Unlock()
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}
