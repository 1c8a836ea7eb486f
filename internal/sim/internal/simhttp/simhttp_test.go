package simhttp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueueHandsOutModesInOrderThenNothing(t *testing.T) {
	q, err := NewQueue([]Fault[string]{{Mode: "a", Times: 2}, {Mode: "b", Times: 1}}, "a", "b")
	require.NoError(t, err)
	var got []string
	for range 4 {
		got = append(got, q.Next())
	}
	assert.Equal(t, []string{"a", "a", "b", ""}, got)
}

func TestQueueRefusesUnknownModesAndNonPositiveTimes(t *testing.T) {
	_, err := NewQueue([]Fault[string]{{Mode: "c", Times: 1}}, "a")
	assert.Error(t, err)
	_, err = NewQueue([]Fault[string]{{Mode: "a", Times: 0}}, "a")
	assert.Error(t, err)
}

func TestMillisecondsRefusesNegativeValues(t *testing.T) {
	d, err := Milliseconds("latency_ms", 1500)
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, d)
	_, err = Milliseconds("latency_ms", -1)
	assert.EqualError(t, err, "latency_ms must not be negative")
}

func TestTrafficKeepsTheHighestConcurrency(t *testing.T) {
	var g Traffic
	leaveA := g.Enter()
	leaveB := g.Enter()
	leaveB()
	leaveC := g.Enter()
	assert.Equal(t, 2, g.MaxInFlight())
	leaveA()
	leaveC()
	g.Reset()
	assert.Equal(t, 0, g.MaxInFlight(), "reset counts only what is still running")
}

func TestTrafficNotesForeignAuthorizationUntilReset(t *testing.T) {
	var g Traffic
	assert.False(t, g.ForeignAuthorizationSeen())
	g.noteForeignAuthorization()
	assert.True(t, g.ForeignAuthorizationSeen())
	g.Reset()
	assert.False(t, g.ForeignAuthorizationSeen())
}
