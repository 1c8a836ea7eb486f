package simhttp

import "sync"

// Traffic is what Guard observes about the requests reaching a simulator:
// how many are handled at once (the highest value seen), so tests can prove
// a client's connection cap holds, and whether any carried an Authorization
// header, which would be a caller's token forwarded downstream.
type Traffic struct {
	mu                   sync.Mutex
	current              int
	max                  int
	foreignAuthorization bool
}

// Enter counts one request in and returns the function that counts it out.
func (g *Traffic) Enter() (leave func()) {
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

// MaxInFlight is the highest concurrency seen since the last reset.
func (g *Traffic) MaxInFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}

// ForeignAuthorizationSeen reports whether any request since the last
// reset carried an Authorization header.
func (g *Traffic) ForeignAuthorizationSeen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.foreignAuthorization
}

func (g *Traffic) noteForeignAuthorization() {
	g.mu.Lock()
	g.foreignAuthorization = true
	g.mu.Unlock()
}

// Reset starts a new measurement; requests still running count towards it.
func (g *Traffic) Reset() {
	g.mu.Lock()
	g.max = g.current
	g.foreignAuthorization = false
	g.mu.Unlock()
}
