package simhttp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueueHandsOutModesInOrderThenNothing(t *testing.T) {
	q, err := NewQueue([]QueueEntry{{Mode: "a", Times: 2}, {Mode: "b", Times: 1}}, "a", "b")
	require.NoError(t, err)
	var got []string
	for range 4 {
		got = append(got, q.Next())
	}
	assert.Equal(t, []string{"a", "a", "b", ""}, got)
}

func TestQueueRefusesUnknownModesAndNonPositiveTimes(t *testing.T) {
	_, err := NewQueue([]QueueEntry{{Mode: "c", Times: 1}}, "a")
	assert.Error(t, err)
	_, err = NewQueue([]QueueEntry{{Mode: "a", Times: 0}}, "a")
	assert.Error(t, err)
}

func TestInFlightKeepsTheHighestConcurrency(t *testing.T) {
	var g InFlight
	leaveA := g.Enter()
	leaveB := g.Enter()
	leaveB()
	leaveC := g.Enter()
	assert.Equal(t, 2, g.Max())
	leaveA()
	leaveC()
	g.Reset()
	assert.Equal(t, 0, g.Max(), "reset counts only what is still running")
}
