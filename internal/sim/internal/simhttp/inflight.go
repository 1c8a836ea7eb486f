package simhttp

import "sync"

// InFlight measures how many requests are being handled at once and the
// highest value seen, so tests can prove a client's connection cap holds.
type InFlight struct {
	mu      sync.Mutex
	current int
	max     int
}

// Enter counts one request in and returns the function that counts it out.
func (g *InFlight) Enter() (leave func()) {
	g.mu.Lock()
	g.current++
	if g.current > g.max {
		g.max = g.current
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.current--
		g.mu.Unlock()
	}
}

// Max is the highest concurrency seen since the last reset.
func (g *InFlight) Max() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}

// Reset starts a new measurement; requests still running count towards it.
func (g *InFlight) Reset() {
	g.mu.Lock()
	g.max = g.current
	g.mu.Unlock()
}
