package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Lambda instance is frozen between invocations, and a refresh that
// outlived the invocation that started it (the caller's budget ended while
// the issuer was slow) is frozen with it. At thaw it is stale: its own
// deadline has passed by the wall clock, so it can only fail. The next
// caller starts a new refresh instead of inheriting that failure, even
// inside the rate-limit interval, which the stale refresh's start opened.
func TestARefreshStaleByTheWallClockIsNotJoinedButStartedAfresh(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	r := &keyRefresher{minInterval: 30 * time.Second, now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	frozen, started := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(frozen) })
	fresh := &keySet{}
	fetches := 0
	fetch := func(ctx context.Context) (*keySet, error) {
		mu.Lock()
		fetches++
		n := fetches
		mu.Unlock()
		if n == 1 {
			close(started)
			<-frozen // the first refresh never gets to finish before the thaw
			return nil, context.DeadlineExceeded
		}
		return fresh, nil
	}

	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.do(gaveUp, fetch)
	require.ErrorIs(t, err, context.Canceled, "the starting caller's budget ended")
	<-started

	mu.Lock()
	now = now.Add(refreshTimeout + time.Second) // frozen, then thawed
	mu.Unlock()
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	set, err := r.do(ctx, fetch)
	require.NoError(t, err)
	assert.Same(t, fresh, set)

	// Inside its own timeout a refresh is joined, not duplicated.
	mu.Lock()
	before := fetches
	mu.Unlock()
	_, err = r.do(ctx, fetch)
	assert.ErrorIs(t, err, errRefreshRateLimited, "the fresh refresh just ran")
	mu.Lock()
	assert.Equal(t, before, fetches)
	mu.Unlock()
}
