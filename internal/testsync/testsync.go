// Package testsync holds test helpers for code that runs on several
// goroutines: a Buffer they can all write to, and Race, which releases n
// goroutines at once.
package testsync

import (
	"bytes"
	"sync"
)

// Buffer collects output written from several goroutines (audit lines of
// concurrent requests, a process's stdout and stderr).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Race runs racer(0) … racer(n-1) on n goroutines held at a start line and
// released together, so they contend as hard as the scheduler allows, and
// returns when all have finished. Racers record their own results (each
// into its own slice element); they must not call t.FailNow.
func Race(n int, racer func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			racer(i)
		})
	}
	close(start)
	wg.Wait()
}
