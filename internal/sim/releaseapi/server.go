package releaseapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// DefaultHoldLimit is how long a "timeout" fault holds a request whose
// client never goes away (60s).
const DefaultHoldLimit = simhttp.DefaultHoldLimit

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
	traffic      simhttp.Traffic
	mu           sync.Mutex
	tickets      []Ticket // in creation order
	lastNumber   int      // keeps counting across resets
	createFaults simhttp.Queue[CreateMode]
	searchFaults simhttp.Queue[SearchMode]
	// searchForTarget are search faults aimed at one target each.
	searchForTarget map[string]SearchMode
	// createForTarget are create faults aimed at one target each.
	createForTarget map[string]aimedCreate
	searchLag       time.Duration
	latency         time.Duration
	lateOverrun     time.Duration
	lateCommits     []lateCommit    // queued by the late-commit faults
	onResend        []createRequest // held by commit_on_resend until the next create for their target
	origins         map[string]Origin
	counters        Stats
}

// aimedCreate is a create fault aimed at one target: the next left creates
// for it draw mode.
type aimedCreate struct {
	mode CreateMode
	left int
}

// New returns an empty Release API simulator.
func New(cfg Config) *Server {
	s := &Server{
		apiKey:     cfg.APIKey,
		clock:      simhttp.ClockOrNow(cfg.Clock),
		defaultLag: cfg.SearchLag,
		holdLimit:  simhttp.HoldLimitOrDefault(cfg.HoldLimit),
		lastNumber: firstTicketNumber,
	}
	if s.defaultLag < 0 {
		s.defaultLag = 0
	}
	s.resetLocked()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", s.handleCreate)
	mux.HandleFunc("GET /tickets", s.handleSearch)
	mux.HandleFunc("GET /tickets/{id}", s.handleGet)
	s.handler = simhttp.Handler(mux, s.apiKey, &s.traffic, simhttp.Control{
		SetFaults: s.handleSetFaults,
		Stats:     func() any { return s.Stats() },
		Reset:     s.Reset,
	})
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
	s.traffic.Reset()
}

func (s *Server) resetLocked() {
	s.tickets = nil
	s.createFaults = simhttp.Queue[CreateMode]{}
	s.searchFaults = simhttp.Queue[SearchMode]{}
	s.searchForTarget = map[string]SearchMode{}
	s.createForTarget = map[string]aimedCreate{}
	s.searchLag = s.defaultLag
	s.latency = 0
	s.lateOverrun = DefaultLateCommitOverrun
	s.lateCommits = nil
	s.onResend = nil
	s.origins = map[string]Origin{}
	s.counters = Stats{TicketsByTarget: make(map[string]int), BrokenPromisesByTarget: make(map[string]int)}
}

// arrive counts a call in *counter, then waits out the configured latency
// whether or not the client is still waiting.
func (s *Server) arrive(counter *int) {
	s.mu.Lock()
	*counter++
	latency := s.latency
	s.mu.Unlock()
	simhttp.Pause(latency)
}
