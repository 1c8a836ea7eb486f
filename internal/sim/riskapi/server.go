package riskapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// DefaultHoldLimit is how long a "timeout" fault holds a request whose
// client never goes away (60s).
const DefaultHoldLimit = simhttp.DefaultHoldLimit

// Config configures a simulated Risk API.
type Config struct {
	// APIKey is the service key every non-/_sim request must present in
	// X-Api-Key. An empty key accepts no request.
	APIKey string
	// Clock stamps created_at; time.Now when nil.
	Clock func() time.Time
	// HoldLimit bounds timeout faults; DefaultHoldLimit when zero.
	HoldLimit time.Duration
}

// Server is the simulated Risk API. It implements http.Handler; all state
// lives in the struct behind one mutex, so several servers can run in one
// test process.
type Server struct {
	apiKey    string
	clock     func() time.Time
	holdLimit time.Duration
	handler   http.Handler
	traffic   simhttp.Traffic

	mu           sync.Mutex
	orders       map[string]string // order id -> merchant id, seeded
	reviews      map[string]Review // review id -> review
	byRequestKey map[string]string // request key -> review id
	lastID       int               // keeps counting across resets
	createFaults simhttp.Queue[CreateMode]
	lookupFaults simhttp.Queue[LookupMode]
	latency      time.Duration
	counters     Stats
}

// New returns a Risk API simulator with its orders seeded.
func New(cfg Config) *Server {
	s := &Server{
		apiKey:    cfg.APIKey,
		clock:     simhttp.ClockOrNow(cfg.Clock),
		holdLimit: simhttp.HoldLimitOrDefault(cfg.HoldLimit),
		orders:    seedOrders(),
	}
	s.resetLocked()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /reviews", s.handleCreate)
	mux.HandleFunc("GET /reviews", s.handleLookup)
	mux.HandleFunc("GET /reviews/{id}", s.handleGetReview)
	mux.HandleFunc("GET /orders/{id}", s.handleGetOrder)
	s.handler = simhttp.Handler(mux, s.apiKey, &s.traffic, simhttp.Control{
		SetFaults: s.handleSetFaults,
		Stats:     func() any { return s.Stats() },
		Reset:     s.Reset,
	})
	return s
}

// ServeHTTP serves the Risk API and its /_sim/ control endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// Reset clears reviews, faults, latency and counters. Orders stay seeded;
// review ids keep counting up so an old id never names a new review.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	s.traffic.Reset()
}

func (s *Server) resetLocked() {
	s.reviews = make(map[string]Review)
	s.byRequestKey = make(map[string]string)
	s.createFaults = simhttp.Queue[CreateMode]{}
	s.lookupFaults = simhttp.Queue[LookupMode]{}
	s.latency = 0
	s.counters = Stats{ReviewsByOrder: make(map[string]int)}
}

// arrive counts a call in *counter (when not nil), then waits out the
// configured latency whether or not the client is still waiting.
func (s *Server) arrive(counter *int) {
	s.mu.Lock()
	if counter != nil {
		*counter++
	}
	latency := s.latency
	s.mu.Unlock()
	simhttp.Pause(latency)
}
