package testsync_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/testsync"
)

func TestBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b testsync.Buffer
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { _, _ = fmt.Fprintf(&b, "line %02d\n", i) })
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	assert.Len(t, lines, 20)
	for i := range 20 {
		assert.Contains(t, lines, fmt.Sprintf("line %02d", i))
	}
}

func TestRaceRunsEveryRacerOnceAndWaitsForAll(t *testing.T) {
	const n = 32
	seen := make([]int, n)
	var running atomic.Int32
	testsync.Race(n, func(i int) {
		running.Add(1)
		seen[i]++
		running.Add(-1)
	})
	for i, c := range seen {
		assert.Equal(t, 1, c, "racer %d", i)
	}
	assert.Zero(t, running.Load(), "Race returned before a racer finished")
}
