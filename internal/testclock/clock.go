// Package testclock is a settable clock for tests: code under test takes
// its Now method as its clock, and the test moves time with Advance, so
// settle windows, leases and backoffs pass without sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told. It is safe for concurrent use:
// servers, executors and reconcilers read it from their own goroutines.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads t until advanced.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's current time; pass c.Now where a func() time.Time is wanted.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
