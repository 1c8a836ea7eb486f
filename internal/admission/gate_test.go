package admission

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestGate(t *testing.T, cfg GateConfig) *Gate {
	t.Helper()
	g, err := NewGate(cfg)
	require.NoError(t, err)
	return g
}

func TestNewGateValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  GateConfig
		ok   bool
	}{
		{"valid", GateConfig{MaxInFlight: 1, MaxQueue: 0, MaxWait: time.Millisecond}, true},
		{"zero in flight", GateConfig{MaxInFlight: 0, MaxQueue: 1, MaxWait: time.Second}, false},
		{"negative queue", GateConfig{MaxInFlight: 1, MaxQueue: -1, MaxWait: time.Second}, false},
		{"zero wait", GateConfig{MaxInFlight: 1, MaxQueue: 1, MaxWait: 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGate(tc.cfg)
			if tc.ok {
				require.NoError(t, err)
				assert.NotNil(t, g)
			} else {
				require.Error(t, err)
				assert.Nil(t, g)
			}
		})
	}
}

func TestRetryAfterHintIsMaxWaitInWholeSeconds(t *testing.T) {
	for maxWait, want := range map[time.Duration]time.Duration{
		50 * time.Millisecond:   time.Second,
		time.Second:             time.Second,
		1500 * time.Millisecond: 2 * time.Second,
		3 * time.Second:         3 * time.Second,
	} {
		assert.Equal(t, want, retryAfterHint(maxWait), "MaxWait %s", maxWait)
	}
}

func TestOverloadedErrorMatchesSentinel(t *testing.T) {
	var err error = &OverloadedError{Reason: ReasonQueueFull, RetryAfter: time.Second}
	wrapped := errors.Join(errors.New("tool call"), err)
	assert.ErrorIs(t, wrapped, ErrOverloaded)
	var oe *OverloadedError
	require.ErrorAs(t, wrapped, &oe)
	assert.Equal(t, ReasonQueueFull, oe.Reason)
	assert.Contains(t, err.Error(), "queue_full")
}

func TestReleaseIsIdempotent(t *testing.T) {
	g := newTestGate(t, GateConfig{MaxInFlight: 2, MaxQueue: 0, MaxWait: time.Second})
	r1, err := g.Acquire(context.Background())
	require.NoError(t, err)
	r2, err := g.Acquire(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, g.Stats().InFlight)

	r1()
	r1()
	r1()
	assert.Equal(t, 1, g.Stats().InFlight, "a repeated release must not free someone else's slot")
	r2()
	assert.Equal(t, 0, g.Stats().InFlight)
}

// The tests that queue callers run in a synctest bubble: time stands still
// while anyone can run, synctest.Wait says when every caller is parked, and
// the bubble fails a test that leaves a goroutine blocked behind it.

func TestFullGateQueuesUpToMaxQueueAndRefusesTheRestAtOnce(t *testing.T) {
	synctest.Test(t, testFullGateQueuesUpToMaxQueueAndRefusesTheRestAtOnce)
}

func testFullGateQueuesUpToMaxQueueAndRefusesTheRestAtOnce(t *testing.T) {
	const (
		maxInFlight = 3
		maxQueue    = 4
		extra       = 10 // callers beyond slots: maxQueue queue, the rest refused
	)
	// MaxWait is long: queued callers must be served by releases, not time out.
	g := newTestGate(t, GateConfig{MaxInFlight: maxInFlight, MaxQueue: maxQueue, MaxWait: time.Minute})
	ctx := context.Background()

	var inFlight, peak atomic.Int64
	enter := func() {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
	}

	// Fill every slot and hold it.
	holders := make([]func(), 0, maxInFlight)
	for range maxInFlight {
		release, err := g.Acquire(ctx)
		require.NoError(t, err)
		enter()
		holders = append(holders, release)
	}

	type result struct {
		err    error
		queued bool // did not return before the holders released
	}
	results := make(chan result, extra)
	var holdersReleased atomic.Bool
	var wg sync.WaitGroup
	for range extra {
		wg.Go(func() {
			release, err := g.Acquire(ctx)
			if err != nil {
				results <- result{err: err, queued: holdersReleased.Load()}
				return
			}
			enter()
			queued := holdersReleased.Load()
			inFlight.Add(-1)
			release()
			results <- result{queued: queued}
		})
	}

	// The refused callers return at once, while all slots are still held.
	synctest.Wait()
	require.Equal(t, maxQueue, g.Stats().Queued)
	require.Len(t, results, extra-maxQueue)
	st := g.Stats()
	assert.Equal(t, maxInFlight, st.InFlight)
	assert.Equal(t, uint64(extra-maxQueue), st.Rejected)

	holdersReleased.Store(true)
	for _, release := range holders {
		inFlight.Add(-1)
		release()
	}
	wg.Wait()
	close(results)

	var served, refused int
	for r := range results {
		if r.err == nil {
			served++
			assert.True(t, r.queued, "a queued caller ran only after a release")
			continue
		}
		refused++
		assert.False(t, r.queued, "refusal came before any release")
		var oe *OverloadedError
		require.ErrorAs(t, r.err, &oe)
		assert.Equal(t, ReasonQueueFull, oe.Reason)
		assert.Equal(t, time.Minute, oe.RetryAfter)
		assert.ErrorIs(t, r.err, ErrOverloaded)
	}
	assert.Equal(t, maxQueue, served)
	assert.Equal(t, extra-maxQueue, refused)
	assert.LessOrEqual(t, peak.Load(), int64(maxInFlight))

	st = g.Stats()
	assert.Zero(t, st.InFlight)
	assert.Zero(t, st.Queued)
}

func TestInFlightNeverExceedsMaxUnderLoad(t *testing.T) {
	synctest.Test(t, testInFlightNeverExceedsMaxUnderLoad)
}

func testInFlightNeverExceedsMaxUnderLoad(t *testing.T) {
	const maxInFlight = 4
	g := newTestGate(t, GateConfig{MaxInFlight: maxInFlight, MaxQueue: 8, MaxWait: 10 * time.Millisecond})

	var inFlight, peak atomic.Int64
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 50 {
				release, err := g.Acquire(context.Background())
				if err != nil {
					assert.ErrorIs(t, err, ErrOverloaded)
					refused.Add(1)
					continue
				}
				n := inFlight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				runtime.Gosched()
				inFlight.Add(-1)
				release()
				served.Add(1)
			}
		})
	}
	wg.Wait()

	assert.LessOrEqual(t, peak.Load(), int64(maxInFlight))
	assert.Positive(t, served.Load())
	assert.Equal(t, int64(64*50), served.Load()+refused.Load())
	assert.Equal(t, uint64(refused.Load()), g.Stats().Rejected)
	assert.Zero(t, g.Stats().InFlight)
	assert.Zero(t, g.Stats().Queued)
}

func TestQueuedCallerGetsWaitExceededAfterMaxWait(t *testing.T) {
	synctest.Test(t, testQueuedCallerGetsWaitExceededAfterMaxWait)
}

func testQueuedCallerGetsWaitExceededAfterMaxWait(t *testing.T) {
	const maxWait = 50 * time.Millisecond
	g := newTestGate(t, GateConfig{MaxInFlight: 1, MaxQueue: 1, MaxWait: maxWait})
	release, err := g.Acquire(context.Background())
	require.NoError(t, err)
	defer release()

	start := time.Now()
	_, err = g.Acquire(context.Background())
	// The bubble's clock moves only when everyone waits: exactly MaxWait passed.
	assert.Equal(t, maxWait, time.Since(start), "refused at MaxWait, not before or after")
	var oe *OverloadedError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, ReasonWaitExceeded, oe.Reason)
	assert.Equal(t, time.Second, oe.RetryAfter)
	assert.ErrorIs(t, err, ErrOverloaded)
	assert.Equal(t, uint64(1), g.Stats().Rejected)
	assert.Zero(t, g.Stats().Queued, "the timed-out caller left the queue")
}

func TestZeroQueueRefusesAtOnceWhenBusy(t *testing.T) {
	g := newTestGate(t, GateConfig{MaxInFlight: 1, MaxQueue: 0, MaxWait: time.Minute})
	release, err := g.Acquire(context.Background())
	require.NoError(t, err)
	defer release()

	_, err = g.Acquire(context.Background())
	var oe *OverloadedError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, ReasonQueueFull, oe.Reason)
}

func TestQueuedCallerStopsWaitingWhenContextIsCancelled(t *testing.T) {
	synctest.Test(t, testQueuedCallerStopsWaitingWhenContextIsCancelled)
}

func testQueuedCallerStopsWaitingWhenContextIsCancelled(t *testing.T) {
	g := newTestGate(t, GateConfig{MaxInFlight: 1, MaxQueue: 1, MaxWait: time.Minute})
	release, err := g.Acquire(context.Background())
	require.NoError(t, err)
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.Acquire(ctx)
		done <- err
	}()
	synctest.Wait()
	require.Equal(t, 1, g.Stats().Queued)
	cancel()

	err = <-done
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrOverloaded, "a caller that went away is not an overload")
	assert.Zero(t, g.Stats().Queued)
	assert.Zero(t, g.Stats().Rejected)
}

func TestAcquireWithEndedContextTakesNoSlot(t *testing.T) {
	g := newTestGate(t, GateConfig{MaxInFlight: 1, MaxQueue: 1, MaxWait: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()

	_, err := g.Acquire(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, g.Stats().InFlight)
}

func BenchmarkGateAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		g, err := NewGate(GateConfig{MaxInFlight: 1, MaxQueue: 0, MaxWait: time.Second})
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			release, err := g.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		g, err := NewGate(GateConfig{MaxInFlight: runtime.GOMAXPROCS(0), MaxQueue: 1 << 16, MaxWait: time.Minute})
		require.NoError(b, err)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				release, err := g.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				release()
			}
		})
	})
}

// The doc promises that a freed slot goes to the longest-waiting caller:
// a newcomer arriving just as a slot frees must queue behind it, and
// queued callers are served in arrival order.
func TestAFreedSlotGoesToTheLongestWaitingCallerNotANewcomer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTestGate(t, GateConfig{MaxInFlight: 1, MaxQueue: 3, MaxWait: time.Minute})
		release, err := g.Acquire(context.Background())
		require.NoError(t, err)

		var order []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		enter := func(name string) {
			wg.Go(func() {
				rel, err := g.Acquire(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				rel()
			})
			synctest.Wait() // queued before the next arrives
		}
		enter("first")
		enter("second")
		release()
		rel, err := g.Acquire(context.Background()) // the newcomer, as the slot frees
		require.NoError(t, err)
		mu.Lock()
		got := append([]string(nil), order...)
		mu.Unlock()
		assert.Equal(t, []string{"first", "second"}, got, "both queued callers were served before the newcomer")
		rel()
		wg.Wait()
	})
}
