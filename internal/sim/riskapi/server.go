package riskapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/intentgate/intentgate/internal/sim/internal/simhttp"
)

// DefaultHoldLimit is how long a "timeout" fault holds a request whose
// client never goes away.
const DefaultHoldLimit = 60 * time.Second

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
	inFlight  simhttp.InFlight

	mu           sync.Mutex
	orders       map[string]string // order id -> merchant id, seeded
	reviews      map[string]Review // review id -> review
	byRequestKey map[string]string // request key -> review id
	lastID       int               // keeps counting across resets
	createFaults simhttp.Queue
	lookupFaults simhttp.Queue
	latency      time.Duration
	counters     Stats
}

// New returns a Risk API simulator with its orders seeded.
func New(cfg Config) *Server {
	s := &Server{
		apiKey:    cfg.APIKey,
		clock:     cfg.Clock,
		holdLimit: cfg.HoldLimit,
		orders:    seedOrders(),
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.holdLimit <= 0 {
		s.holdLimit = DefaultHoldLimit
	}
	s.resetLocked()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /reviews", s.handleCreate)
	mux.HandleFunc("GET /reviews", s.handleLookup)
	mux.HandleFunc("GET /reviews/{id}", s.handleGetReview)
	mux.HandleFunc("GET /orders/{id}", s.handleGetOrder)
	mux.HandleFunc("POST /_sim/faults", s.handleSetFaults)
	mux.HandleFunc("GET /_sim/stats", s.handleStats)
	mux.HandleFunc("POST /_sim/reset", s.handleReset)
	s.handler = simhttp.Guard(s.apiKey, &s.inFlight, s.noteForeignAuthorization, mux)
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
	s.inFlight.Reset()
}

func (s *Server) resetLocked() {
	s.reviews = make(map[string]Review)
	s.byRequestKey = make(map[string]string)
	s.createFaults = simhttp.Queue{}
	s.lookupFaults = simhttp.Queue{}
	s.latency = 0
	s.counters = Stats{ReviewsByOrder: make(map[string]int)}
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
