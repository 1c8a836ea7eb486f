package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/testclock"
)

// A dispatcher whose clock is behind the provider's by more than the bound
// sends a deadline that has already passed: the provider refuses and
// commits nothing (proven no effect), and a reconciler with a sane clock
// sends it. One ticket, audited clean.
func TestDispatcherBehindBeyondTheBoundIsRefusedAndTheReconcilerSends(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 5 * time.Second,
		clocks: clocks{base: testclock.New(t0), dispatcher: -30 * time.Second}})
	op := f.submitWithFault(t, "", 0)
	assert.Equal(t, operation.StateRetryable, op.State, "journal: %+v", op.Journal)
	assert.Equal(t, 1, f.sim.Stats().CreatesPastDeadline)

	got := f.drive(t, op.Handle)

	assert.Equal(t, 1, f.tickets())
	assert.Equal(t, operation.StateSucceeded, got.State, "journal: %+v", got.Journal)
	assert.True(t, journalHas(got, "duplicate_audit_clean"))
}
