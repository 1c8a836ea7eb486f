package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/testclock"
)

// A lost dispatcher's lease ends at the commit deadline (lease end plus the
// skew bound), but the Release API's index lags behind its clock: a probe
// then could only be inconclusive and would spend one of the budget's
// probes. The operation becomes UNKNOWN due when the index can cover the
// deadline, as a dispatcher's own timeout makes it, and the stream's prompt
// look at it spends nothing.
func TestALostDispatchersFirstProbeWaitsUntilItCanProveSomething(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: 3 * time.Second, skew: 10 * time.Second, clocks: clocks{base: testclock.New(t0)}})
	op := f.storedTicketOp(t, f.disp.Lease())
	f.base.Advance(f.disp.Lease() + 10*time.Second) // lease end + skew bound
	rep, err := f.recon.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Transitions)
	lost := f.get(t, op.Handle)
	require.Equal(t, operation.StateUnknown, lost.State)
	assert.Equal(t, f.disp.FirstProbeAt(lost, f.fam.Recovery()), lost.DueAt, "due at the first probe that can prove anything")
	assert.True(t, lost.DueAt.After(f.base.Now()))

	// The stream record of the entry into UNKNOWN arrives at once.
	_, err = f.recon.Reconcile(context.Background(), lost)
	require.NoError(t, err)
	assert.Zero(t, f.get(t, op.Handle).ProbeCount, "nothing spent before the index can cover the deadline")

	got := f.drive(t, op.Handle)
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.Equal(t, 1, f.tickets())
}
