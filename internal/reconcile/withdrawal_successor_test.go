package reconcile_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
)

// The withdrawn create commits late (ticket A), and the fact's next holder
// times out on its own create, which breaks its promise too, by less than
// the grace (ticket B). The holder's probe finds A and takes it as its own;
// nothing of the holder's is audited, as it made one dispatch. The
// withdrawal's audit must not call A the holder's and end clean before B
// can land: two tickets, and one must be reported.
func TestAWithdrawalAuditCoversTheNextHolderThatAdoptedTheLateTicket(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)
	next := f.submitLate(t, "deploy-payments-again", 8*time.Second)
	require.Equal(t, operation.StateUnknown, next.State)

	w, h := f.sweepTogether(t, withdrawn.Handle, next.Handle)

	require.Equal(t, 2, f.tickets(), "both creates committed late")
	require.True(t, journalHas(h, "probe_found_one"), "the holder adopted a ticket it found: %+v", h.Journal)
	reported := len(w.EffectsReportedAfterFailure()) + h.DuplicateResources
	assert.Positive(t, reported, "the second ticket is reported somewhere\nwithdrawn: %+v\nholder: %+v", w.Journal, h.Journal)
}

// The same holder whose own create never lands: the audit waits out the
// holder's horizon and grace too, then finds one ticket, held, and ends
// clean.
func TestAWithdrawalAuditThatWaitedForAnAdoptingHolderEndsCleanWhenItsCreateNeverLands(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)
	next := f.submitAs(t, "deploy-payments-again", releaseapi.CreateTimeoutBeforeCommit)
	require.Equal(t, operation.StateUnknown, next.State)

	w, h := f.sweepTogether(t, withdrawn.Handle, next.Handle)

	require.Equal(t, 1, f.tickets())
	require.True(t, journalHas(h, "probe_found_one"), "journal: %+v", h.Journal)
	assert.Empty(t, w.EffectsReportedAfterFailure(), "journal: %+v", w.Journal)
	assert.True(t, journalHas(w, "duplicate_audit_clean"), "journal: %+v", w.Journal)
	assert.Contains(t, w.Journal[len(w.Journal)-1].Detail, "found by search")
}

// submitLate asks for the fixture's ticket under operationID, its create
// committing overrun past its deadline.
func (f releaseFixture) submitLate(t *testing.T, operationID string, overrun time.Duration) operation.Operation {
	t.Helper()
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{LateCommitOverrunMS: int(overrun / time.Millisecond),
		Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateCommitLateBeyondDeadline, Times: 1}}}))
	args, err := json.Marshal(map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234",
		"environment": "production-eu", "operation_id": operationID})
	require.NoError(t, err)
	sub, err := f.disp.Submit(context.Background(), f.fam, deployer, args, "")
	require.NoError(t, err)
	return sub.Operation
}

// sweepTogether reconciles the operations as a sweep does: always the one
// due first, moving the base clock to its due time, until none is due;
// then lets five minutes pass and sweeps once more.
func (f releaseFixture) sweepTogether(t *testing.T, handles ...string) (operation.Operation, operation.Operation) {
	t.Helper()
	ctx := context.Background()
	for round := 0; round < 2; round++ {
		for step := 0; ; step++ {
			require.Less(t, step, 120, "the operations never stopped being due")
			var first operation.Operation
			for _, h := range handles {
				op := f.get(t, h)
				if needsWork(op) && (first.Handle == "" || op.DueAt.Before(first.DueAt)) {
					first = op
				}
			}
			if first.Handle == "" {
				break
			}
			due := first.DueAt
			if first.State == operation.StatePending {
				due = due.Add(f.skew)
			}
			if now := f.at(f.reconciler)(); due.After(now) {
				f.base.Advance(due.Sub(now))
			}
			_, err := f.recon.Reconcile(ctx, first)
			require.NoError(t, err)
		}
		f.base.Advance(5 * time.Minute)
	}
	return f.get(t, handles[0]), f.get(t, handles[1])
}
