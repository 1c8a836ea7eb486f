package chaos

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The burst hold is what invariant 7's burst rules rest on: it must lift
// only when every call has returned or is held (complete), and record
// every hold's interval.

func TestInsertHoldLiftsOnceEveryCallHasReturnedOrIsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newInsertHold([]string{"a", "b", "c"})
		errs := make(chan error, 2)
		for _, handle := range []string{"a", "b"} {
			go func() { errs <- h.hold(context.Background(), "replica-0.0", handle) }()
		}
		go func() {
			time.Sleep(100 * time.Millisecond) // refused at the gate, answered later
			h.callReturned()
		}()
		start := time.Now()
		complete, at := h.liftWhenSettled(time.Second)
		assert.True(t, complete)
		assert.Equal(t, start.Add(100*time.Millisecond), at)
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)

		holds := h.snapshot()
		require.Len(t, holds, 2)
		for _, hd := range holds {
			assert.Equal(t, "replica-0.0", hd.Process)
			assert.Equal(t, start, hd.From)
			assert.Equal(t, at, hd.To)
		}
		assert.NoError(t, h.hold(context.Background(), "replica-0.0", "c"), "after the lift an insert passes")
		assert.Len(t, h.snapshot(), 2, "and is not recorded as held")
	})
}

func TestInsertHoldLiftedByItsLimitIsNotComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newInsertHold([]string{"a", "b"})
		go func() { _ = h.hold(context.Background(), "replica-0.0", "a") }()
		start := time.Now()
		complete, at := h.liftWhenSettled(time.Second)
		assert.False(t, complete, "call b neither returned nor was held")
		assert.Equal(t, start.Add(time.Second), at)
	})
}

func TestAHeldInsertWhoseContextEndsIsNeverSentAndStopsCountingAsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newInsertHold([]string{"a", "b"})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := h.hold(ctx, "replica-0.0", "a")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		holds := h.snapshot()
		require.Len(t, holds, 1)
		assert.Equal(t, start.Add(50*time.Millisecond), holds[0].To)

		// Its caller's answer counts; the hold is not complete until b too.
		h.callReturned()
		go func() { _ = h.hold(context.Background(), "replica-0.0", "b") }()
		complete, _ := h.liftWhenSettled(time.Second)
		assert.True(t, complete)
	})
}
