package pause_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/pause"
)

// The tests run in a synctest bubble, whose clock moves only while every
// goroutine waits: the durations they check are exact.

func TestSleepWaitsTheWholeDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		assert.NoError(t, pause.Sleep(context.Background(), 90*time.Second))
		assert.Equal(t, 90*time.Second, time.Since(start))
	})
}

func TestSleepEndsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		assert.ErrorIs(t, pause.Sleep(ctx, time.Hour), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "returns when the context ends, not at the hour")
	})
}

func TestSleepWithAnEndedContextReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		assert.ErrorIs(t, pause.Sleep(ctx, time.Hour), context.Canceled)
		assert.Zero(t, time.Since(start))
	})
}
