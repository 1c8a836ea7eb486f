package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools"
)

// taskService is the tasks service over the fixture's executor, for the
// withdrawals (tasks/cancel) the reconciler races.
func (f fixture) taskService(t *testing.T) (*tasks.Service, tasks.IDs) {
	t.Helper()
	ids, err := tasks.NewIDs([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	ts, err := tasks.New(tasks.Config{Executor: f.exec, Tools: []tools.Published{f.family}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return caller, true }})
	require.NoError(t, err)
	return ts, ids
}

// The Risk API deduplicates creates by our key but promises no commit
// deadline: its "not found" after the settle window makes a re-send under
// the same key safe, and says nothing about a create still held at the
// provider. A withdrawal then would record FAILED, release the order, and
// let the held create and the next request's create both commit.
func TestAnAbsenceTheProviderMayStillOvertakeCannotBeWithdrawn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	order := orderID(7)
	op := f.submitUnknown(t, riskapi.CreateTimeoutBeforeCommit, "withdraw-0001", order)

	f.clock.Advance(5 * time.Second) // past the settle window
	res, err := f.service(t).Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	require.Equal(t, operation.EventProbeNotFound, res.Event)
	require.Equal(t, operation.StateRetryable, f.get(t, op.Handle).State)

	ts, ids := f.taskService(t)
	decision, err := ts.Cancel(ctx, ids.For(op.Handle, op.CreatedAt))
	require.NoError(t, err)
	assert.False(t, decision.Withdrawn, "the create may still commit at the provider")
	assert.Contains(t, decision.Reason, "may still")
	assert.Equal(t, operation.StateRetryable, f.get(t, op.Handle).State, "nothing withdrawn")

	// The held create commits; the order's next request is answered by
	// the same operation, and the re-send finds the first review.
	_, err = f.family.Dispatch(ctx, op)
	require.NoError(t, err)
	again := f.submit(t, "withdraw-0002", order)
	assert.Equal(t, op.Handle, again.Handle, "the order is still held by the first operation")
	assert.Equal(t, 1, f.sim.Stats().ReviewsByOrder[order], "one review per order")
}

// The Release API promises never to commit a create after its commit
// deadline: once its index covers the horizon of every dispatch, absence
// is final, the probe records it so, and the owner may withdraw. Nothing
// commits afterwards, and the ticket's next request makes the one ticket.
func TestAnAbsencePastTheProvidersPromisedHorizonMayBeWithdrawn(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	ctx := context.Background()
	op := f.submitWithFault(t, releaseapi.CreateTimeoutBeforeCommit, 0)
	require.Equal(t, operation.StateUnknown, op.State)
	for step := 0; op.State == operation.StateUnknown; step++ {
		require.Less(t, step, 30, "the probe never proved absence")
		if now := f.at(f.reconciler)(); op.DueAt.After(now) {
			f.base.Advance(op.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(ctx, op)
		require.NoError(t, err)
		op = f.get(t, op.Handle)
	}
	require.Equal(t, operation.StateRetryable, op.State)
	last := op.Journal[len(op.Journal)-1]
	require.Equal(t, operation.EventProbeNotFound, last.Type)
	assert.True(t, last.LateCommitsBounded, "the search covered the promised horizon")

	ids, err := tasks.NewIDs([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	ts, err := tasks.New(tasks.Config{Executor: f.disp, Tools: []tools.Published{f.fam}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return deployer, true }})
	require.NoError(t, err)
	decision, err := ts.Cancel(ctx, ids.For(op.Handle, op.CreatedAt))
	require.NoError(t, err)
	assert.True(t, decision.Withdrawn)
	assert.Equal(t, operation.StateFailed, f.get(t, op.Handle).State)

	f.base.Advance(5 * time.Minute)
	assert.Equal(t, 0, f.tickets(), "nothing committed after the withdrawal")
}
