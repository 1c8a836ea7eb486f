package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrOverloaded is matched (errors.Is) by every *OverloadedError.
var ErrOverloaded = errors.New("admission: overloaded")

// Reasons carried by OverloadedError.
const (
	// ReasonQueueFull: every slot busy and the queue at its bound; the
	// caller was refused at once without waiting.
	ReasonQueueFull = "queue_full"
	// ReasonWaitExceeded: the caller queued for MaxWait without a slot
	// becoming free.
	ReasonWaitExceeded = "wait_exceeded"
)

// OverloadedError is the fast refusal the gate gives instead of a backlog.
// Nothing was dispatched, so the caller may retry the same call (same
// operation_id) after RetryAfter.
type OverloadedError struct {
	Reason     string        // ReasonQueueFull or ReasonWaitExceeded
	RetryAfter time.Duration // hint for the caller, see GateConfig.MaxWait
}

func (e *OverloadedError) Error() string {
	return fmt.Sprintf("admission: overloaded (%s), retry after %s", e.Reason, e.RetryAfter)
}

// Is makes errors.Is(err, ErrOverloaded) true.
func (e *OverloadedError) Is(target error) bool { return target == ErrOverloaded }

// GateConfig bounds one instance's concurrent work.
type GateConfig struct {
	// MaxInFlight is the number of calls allowed to run at once (>= 1).
	MaxInFlight int
	// MaxQueue is the number of calls allowed to wait for a slot (>= 0).
	// Zero means no waiting: a busy gate refuses at once.
	MaxQueue int
	// MaxWait bounds how long a queued call waits for a slot (> 0). It
	// also sets the RetryAfter hint: MaxWait rounded up to a whole second
	// (at least 1s). By then every call queued at the time of the refusal
	// has either got a slot or given up, so the queue has turned over at
	// least once; whole seconds because clients express retry delays that
	// way (HTTP Retry-After).
	MaxWait time.Duration
}

// Validate reports the first invalid field.
func (c GateConfig) Validate() error {
	switch {
	case c.MaxInFlight < 1:
		return fmt.Errorf("admission: MaxInFlight must be >= 1, got %d", c.MaxInFlight)
	case c.MaxQueue < 0:
		return fmt.Errorf("admission: MaxQueue must be >= 0, got %d", c.MaxQueue)
	case c.MaxWait <= 0:
		return fmt.Errorf("admission: MaxWait must be > 0, got %s", c.MaxWait)
	}
	return nil
}

// GateStats is a point-in-time view for metrics and health output.
type GateStats struct {
	InFlight    int
	Queued      int
	MaxInFlight int
	MaxQueue    int
	Rejected    uint64 // total refusals (queue_full + wait_exceeded) since creation
}

// Gate is a counting semaphore (a buffered channel: a send takes a slot, a
// receive frees one) with a bounded wait queue (an atomic counter). A
// release hands its slot straight to the longest-waiting sender, so queued
// calls are not overtaken by newcomers. Safe for concurrent use; it starts
// no goroutines.
type Gate struct {
	cfg        GateConfig
	slots      chan struct{}
	queued     atomic.Int64
	rejected   atomic.Uint64
	retryAfter time.Duration
}

// NewGate validates cfg and returns an empty gate.
func NewGate(cfg GateConfig) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Gate{
		cfg:        cfg,
		slots:      make(chan struct{}, cfg.MaxInFlight),
		retryAfter: retryAfterHint(cfg.MaxWait),
	}, nil
}

func retryAfterHint(maxWait time.Duration) time.Duration {
	ra := (maxWait + time.Second - 1).Truncate(time.Second)
	return max(ra, time.Second)
}

// Acquire takes a slot, waiting in the queue if needed. On success the
// returned release frees the slot; calling it more than once is harmless.
// Errors: *OverloadedError (ErrOverloaded) when the queue is full (at once)
// or MaxWait passes; the context's error, wrapped, when ctx ends first or
// had already ended.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("admission: before acquiring a slot: %w", context.Cause(ctx))
	}
	select {
	case g.slots <- struct{}{}:
		return g.releaser(), nil
	default:
	}

	if !g.joinQueue() {
		g.rejected.Add(1)
		return nil, &OverloadedError{Reason: ReasonQueueFull, RetryAfter: g.retryAfter}
	}
	defer g.queued.Add(-1)

	timer := time.NewTimer(g.cfg.MaxWait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.releaser(), nil
	case <-timer.C:
		g.rejected.Add(1)
		return nil, &OverloadedError{Reason: ReasonWaitExceeded, RetryAfter: g.retryAfter}
	case <-ctx.Done():
		return nil, fmt.Errorf("admission: waiting for a slot: %w", context.Cause(ctx))
	}
}

// joinQueue reserves a queue place unless the queue is full. The CAS loop
// keeps the counter from ever exceeding MaxQueue, even transiently.
func (g *Gate) joinQueue() bool {
	limit := int64(g.cfg.MaxQueue)
	for {
		n := g.queued.Load()
		if n >= limit {
			return false
		}
		if g.queued.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (g *Gate) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-g.slots }) }
}

// Stats returns the current counters. InFlight and Queued are sampled
// separately and may be mutually inconsistent by one under load.
func (g *Gate) Stats() GateStats {
	return GateStats{
		InFlight:    len(g.slots),
		Queued:      int(g.queued.Load()),
		MaxInFlight: g.cfg.MaxInFlight,
		MaxQueue:    g.cfg.MaxQueue,
		Rejected:    g.rejected.Load(),
	}
}
