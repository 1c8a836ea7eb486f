package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/testclock"
)

// Both creates of one operation break the provider's promise: the first
// commits after the probe that proved it absent, the re-send commits
// overrun past its own deadline. A 10,000-operation campaign found the
// re-send's ticket landing after a duplicate audit that had looked only a
// settle window past the horizon, so the operation stayed SUCCEEDED on one
// of two tickets. The audit looks as far past the horizon as a first
// dispatch's late commit is given before the re-send's (the lease and the
// skew bound): a re-send breaking its promise by less is the incident too.
func TestAResendThatBreaksItsPromiseIsCaughtByTheDuplicateAudit(t *testing.T) {
	for _, overrun := range []time.Duration{4 * time.Second, 10 * time.Second, 15 * time.Second} {
		t.Run(overrun.String(), func(t *testing.T) {
			f := newReleaseFixture(t, releaseOptions{lag: 200 * time.Millisecond, skew: 10 * time.Second})
			op := f.submitTwoBrokenPromises(t, overrun)

			got := f.drive(t, op.Handle)

			require.Equal(t, 2, f.tickets(), "both creates committed, each past its deadline")
			require.Equal(t, 2, f.sim.Stats().CreateCalls)
			assert.Equal(t, operation.StateEscalated, got.State,
				"two tickets for one intent end as the incident, never SUCCEEDED on one of them: %+v", got.Journal)
			assert.Equal(t, operation.OutcomeIncidentMultipleEffects, got.Outcome)
			assert.Equal(t, 2, got.DuplicateResources)
		})
	}
}

// The audit's due time is not enough: a provider whose index lags more
// than usual answers an audit whose watermark has passed the horizon but
// not the grace. Such an answer proves nothing about a re-send breaking its
// promise inside the grace, so the audit waits for the index instead of
// calling the operation clean.
func TestADuplicateAuditWaitsForTheIndexToCoverItsGrace(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: 200 * time.Millisecond, skew: 10 * time.Second})
	op := f.submitTwoBrokenPromises(t, 10*time.Second)
	ctx := context.Background()
	for step := 0; ; step++ {
		require.Less(t, step, 30)
		cur := f.get(t, op.Handle)
		if cur.State == operation.StateSucceeded && cur.AuditPending() {
			break
		}
		if now := f.at(f.reconciler)(); cur.DueAt.After(now) {
			f.base.Advance(cur.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(ctx, cur)
		require.NoError(t, err)
	}
	// At the audit's due time (horizon + grace + settle) an index 15 s
	// behind has passed the horizon, not the re-send's commit 10 s later.
	lag := 15_000
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{SearchLagMS: &lag}))

	got := f.drive(t, op.Handle)

	require.Equal(t, 2, f.tickets())
	assert.Equal(t, operation.StateEscalated, got.State, "journal: %+v", got.Journal)
	assert.Equal(t, operation.OutcomeIncidentMultipleEffects, got.Outcome)
	assert.True(t, journalHas(got, "duplicate_audit_deferred"), "the lagging answer was not taken as clean: %+v", got.Journal)
}

// The grace is counted on the provider's clock, the one that honours the
// deadlines and stamps the watermark: dispatcher, reconciler and provider
// clocks apart by up to the bound do not let a re-send's broken promise
// (10 s, the campaign's) slip past the audit.
func TestAResendsBrokenPromiseIsCaughtWhateverTheClocksWithinTheBound(t *testing.T) {
	const bound = 10 * time.Second
	for _, sk := range []struct{ d, r, p time.Duration }{
		{-10 * time.Second, 0, 0}, {10 * time.Second, 0, 0},
		{0, -10 * time.Second, 0}, {0, 10 * time.Second, 0},
		{0, 0, -10 * time.Second}, {0, 0, 10 * time.Second},
		{-5 * time.Second, 5 * time.Second, -5 * time.Second}, {5 * time.Second, -5 * time.Second, 5 * time.Second},
	} {
		t.Run(fmt.Sprintf("dispatcher%+ds_reconciler%+ds_provider%+ds", int(sk.d.Seconds()), int(sk.r.Seconds()), int(sk.p.Seconds())), func(t *testing.T) {
			f := newReleaseFixture(t, releaseOptions{lag: 200 * time.Millisecond, skew: bound,
				clocks: clocks{base: testclock.New(t0), dispatcher: sk.d, reconciler: sk.r, provid: sk.p}})
			op := f.submitTwoBrokenPromises(t, 10*time.Second)

			got := f.drive(t, op.Handle)

			if f.tickets() == 1 {
				// A reconciler behind the provider probes later by the
				// provider's clock: the first create's late commit is
				// already indexed, found, and nothing is re-sent.
				assert.Equal(t, 1, f.sim.Stats().CreateCalls)
				assert.Equal(t, operation.StateSucceeded, got.State, "journal: %+v", got.Journal)
				return
			}
			require.Equal(t, 2, f.tickets())
			assert.Equal(t, operation.StateEscalated, got.State, "journal: %+v", got.Journal)
			assert.Equal(t, operation.OutcomeIncidentMultipleEffects, got.Outcome)
		})
	}
}

// submitTwoBrokenPromises sends the first create under
// commit_late_beyond_deadline (10 s past its deadline) and arms the same
// fault, overrun past the deadline, for the next create: the re-send.
func (f releaseFixture) submitTwoBrokenPromises(t *testing.T, overrun time.Duration) operation.Operation {
	t.Helper()
	op := f.submitWithFault(t, releaseapi.CreateCommitLateBeyondDeadline, 10*time.Second)
	require.Equal(t, operation.StateUnknown, op.State)
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{
		Create:              []releaseapi.CreateFault{{Mode: releaseapi.CreateCommitLateBeyondDeadline, Times: 1}},
		LateCommitOverrunMS: int(overrun / time.Millisecond),
	}))
	return op
}
