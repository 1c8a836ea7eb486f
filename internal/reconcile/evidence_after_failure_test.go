package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// A dispatcher stalls past its lease while its create commits. The
// provider's search misses the ticket (it broke its promise: the absence
// it proves is wrong) and the owner withdraws the operation. When the
// stalled dispatcher's verified ticket id arrives, the operation is
// FAILED: the id must still be journalled, since it is the only record
// that an effect exists, and the withdrawal still reads as cancelled.
func TestAVerifiedEffectReportedAfterTheOperationFailedIsJournalledNotDropped(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	ctx := context.Background()
	op := f.storedTicketOp(t, 10*time.Second)

	ids, err := tasks.NewIDs([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	ts, err := tasks.New(tasks.Config{Executor: f.disp, Tools: []tools.Published{f.fam}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return deployer, true }})
	require.NoError(t, err)

	lose := &leaseLoser{ReleaseAPI: f.client, lose: func() {
		f.base.Advance(11 * time.Second)
		res, err := f.recon.Reconcile(ctx, f.get(t, op.Handle))
		require.NoError(t, err)
		require.Equal(t, operation.EventDispatcherLost, res.Event)
		// The search that missed the committed ticket, taken for proof.
		now := f.at(f.reconciler)()
		f.journal(t, op.Handle, operation.Event{Type: operation.EventProbeNotFound, At: now, NextAt: now.Add(time.Minute),
			Source: release.ProbeSource, Result: reconcile.ResultNotFound, LateCommitsBounded: true})
		d, err := ts.Cancel(ctx, ids.For(op.Handle, op.CreatedAt))
		require.NoError(t, err)
		require.True(t, d.Withdrawn, "absence looked final, so the owner may withdraw")
	}}
	slow := release.New(lose, nil, release.RecoveryForLag(time.Second))

	_, _, err = f.disp.Dispatch(ctx, slow, op)
	require.Error(t, err, "the dispatcher lost the race")

	cur := f.get(t, op.Handle)
	require.Equal(t, operation.StateFailed, cur.State)
	var evidence []operation.Event
	for _, ev := range cur.Journal {
		if ev.Type == operation.EventEvidenceRecorded {
			evidence = append(evidence, ev)
		}
	}
	require.Len(t, evidence, 1, "the verified ticket is journalled on the FAILED operation, not dropped: %+v", cur.Journal)
	assert.Equal(t, "ticket-9001", evidence[0].ResourceID)
	assert.Equal(t, []string{"ticket-9001"}, cur.EffectsReportedAfterFailure())
	assert.Equal(t, 1, f.tickets(), "the effect exists at the provider")

	task, err := ts.Get(ctx, ids.For(op.Handle, op.CreatedAt))
	require.NoError(t, err)
	assert.Equal(t, tasks.StatusCancelled, task.Status, "a terminal status never changes")
	assert.Contains(t, task.StatusMessage, "ticket-9001", "nor does it still claim nothing was executed")

	// A replay is no longer told the fact may be asked for again: it is
	// free, and asking would make a second ticket.
	replay := f.fam.Render(deployer, tools.Submission{Operation: cur, Replayed: true})
	body, ok := replay.Body.(release.Result)
	require.True(t, ok)
	assert.Contains(t, body.Message, "ticket-9001")
	assert.NotContains(t, body.NextAction.Hint, "new operation_id;")
	assert.Contains(t, body.NextAction.Hint, "operator")
}
