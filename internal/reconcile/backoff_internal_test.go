package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffDoublesFromOneSecondAndCapsAtOneMinute(t *testing.T) {
	for n, want := range map[int]time.Duration{
		-1: time.Second, 0: time.Second, 1: 2 * time.Second, 5: 32 * time.Second, 6: time.Minute, 1000: time.Minute,
	} {
		assert.Equal(t, want, backoff(n), "n=%d", n)
	}
}

func TestRandomJitterStaysWithinTwentyPercent(t *testing.T) {
	for range 1000 {
		d := randomJitter(10 * time.Second)
		assert.GreaterOrEqual(t, d, 8*time.Second)
		assert.LessOrEqual(t, d, 12*time.Second)
	}
	assert.Equal(t, time.Duration(0), randomJitter(0))
}
