package testclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/testclock"
)

var t0 = time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC)

func TestClockStandsStillUntilAdvanced(t *testing.T) {
	c := testclock.New(t0)
	assert.Equal(t, t0, c.Now())
	assert.Equal(t, t0, c.Now(), "reading does not move the clock")
	c.Advance(90 * time.Second)
	assert.Equal(t, t0.Add(90*time.Second), c.Now())
}

func TestConcurrentAdvancesAllCount(t *testing.T) {
	c := testclock.New(t0)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c.Advance(time.Second)
			_ = c.Now()
		})
	}
	wg.Wait()
	assert.Equal(t, t0.Add(50*time.Second), c.Now())
}
