package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/testsync"
	"github.com/intentgate/intentgate/internal/tools"
)

func TestDroppedResponseAfterCommitConvergesToSucceededWithReceipt(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	ctx := context.Background()
	op := f.submitUnknown(t, riskapi.CreateDropResponseAfterCommit, "op-dropped-0001", orderID(1))

	res, err := svc.Reconcile(ctx, op)
	require.NoError(t, err)
	assert.True(t, res.Skipped, "inside the settle window the probe waits: %+v", res)

	f.clock.Advance(riskreviewSettle + time.Millisecond)
	res, err = svc.Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	assert.Equal(t, operation.EventProbeFoundOne, res.Event)
	assert.Equal(t, operation.StateSucceeded, res.To)

	got := f.get(t, op.Handle)
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.Equal(t, operation.OutcomeCommittedAndVerified, got.Outcome)
	require.NotEmpty(t, got.ResourceID)
	assert.Equal(t, tools.Receipt(op.Handle, got.ResourceID), got.Receipt)
	ev := lastEvent(got)
	assert.Equal(t, "risk_provider", ev.Source)
	assert.Equal(t, reconcile.ResultOneExactMatch, ev.Result)
	assert.Equal(t, 1, got.ProbeCount)

	stats := f.sim.Stats()
	assert.Equal(t, 1, stats.CreateCalls)
	assert.Equal(t, 1, stats.ReviewsCommitted)

	recs := f.audit.records(t, obs.KindReconcile)
	require.Len(t, recs, 1)
	assert.Equal(t, "UNKNOWN", recs[0]["from_state"])
	assert.Equal(t, "SUCCEEDED", recs[0]["to_state"])
	assert.EqualValues(t, 1, recs[0]["probe_count"])
}

// riskreviewSettle is how long after a dispatch starts a zero-match lookup
// can prove absence: the fixture's downstream budget (2s, the latest our wait
// can end) plus riskreview.DefaultRecovery().SettleWindow (2s).
const riskreviewSettle = 4 * time.Second

func TestProvenAbsenceThenEightReconcilersClaimExactlyOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	op := f.submitUnknown(t, riskapi.CreateTimeoutBeforeCommit, "op-absent-0001", orderID(2))

	f.clock.Advance(riskreviewSettle)
	res, err := f.service(t).Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	require.Equal(t, operation.EventProbeNotFound, res.Event)
	retryable := f.get(t, op.Handle)
	require.Equal(t, operation.StateRetryable, retryable.State)
	assert.Equal(t, operation.OutcomeFailedWithoutEffect, retryable.Outcome)
	provenAt := lastEvent(retryable).At
	assert.Equal(t, provenAt.Add(time.Second), retryable.DueAt, "next_retry_at = now + backoff(0)")

	res, err = f.service(t).Reconcile(ctx, retryable)
	require.NoError(t, err)
	assert.True(t, res.Skipped, "not due before next_retry_at")

	f.clock.Advance(time.Second)
	const workers = 8
	services := make([]*reconcile.Service, workers)
	for i := range services {
		services[i] = f.service(t)
	}
	results := make([]reconcile.Result, workers)
	errs := make([]error, workers)
	testsync.Race(workers, func(i int) { results[i], errs[i] = services[i].Reconcile(ctx, retryable) })

	won, lost := 0, 0
	for i, r := range results {
		require.NoError(t, errs[i])
		switch r.ClaimResult {
		case reconcile.ClaimWon:
			won++
			assert.Equal(t, operation.EventCreateSucceeded, r.Dispatch)
			assert.Equal(t, operation.StateSucceeded, r.To)
		case reconcile.ClaimLost:
			lost++
		}
	}
	assert.Equal(t, 1, won)
	assert.Equal(t, workers-1, lost)

	final := f.get(t, op.Handle)
	assert.Equal(t, operation.StateSucceeded, final.State)
	assert.Equal(t, 1, final.RetryCount)
	assert.Equal(t, 2, final.Attempts())
	var claim operation.Event
	for _, ev := range final.Journal {
		if ev.Type == operation.EventRetryClaimed {
			claim = ev
		}
	}
	assert.Contains(t, claim.Detail, "prior_state=failed_without_effect")
	assert.Contains(t, claim.Detail, "provider_supports_idempotency=true")
	assert.Contains(t, claim.Detail, "reconciliation_fresh_at="+provenAt.UTC().Format(time.RFC3339Nano))
	assert.Contains(t, claim.Detail, "retry_budget_remaining=2")
	assert.Contains(t, claim.Detail, "decision=allow_single_retry")

	stats := f.sim.Stats()
	assert.Equal(t, 2, stats.CreateCalls, "the timed-out create plus exactly one claimed re-send")
	assert.Equal(t, 1, stats.ReviewsCommitted)
	assert.Equal(t, []string{op.Handle, op.Handle}, f.keys.all(), "the re-send reuses the request key")

	claims := map[any]int{}
	for _, r := range f.audit.records(t, obs.KindReconcile) {
		claims[r["claim_result"]]++
	}
	assert.Equal(t, 1, claims[reconcile.ClaimWon])
	assert.Equal(t, workers-1, claims[reconcile.ClaimLost])
}

func TestDispatcherDiesAfterClaimSweepExpiresLeaseAndProbeFindsTheEffect(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	ctx := context.Background()
	op := f.submitUnknown(t, riskapi.CreateError500BeforeCommit, "op-diedafter-01", orderID(3))
	f.clock.Advance(riskreviewSettle)
	_, err := svc.Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	f.clock.Advance(time.Second)

	// A worker claims, sends (the provider commits), and dies before it
	// can record the answer.
	retryable := f.get(t, op.Handle)
	require.Equal(t, operation.StateRetryable, retryable.State)
	now := f.clock.Now()
	claimed, err := f.exec.Transition(ctx, f.family.Name(), retryable, operation.Event{
		Type: operation.EventRetryClaimed, At: now, LeaseUntil: now.Add(f.exec.Lease()),
	}, nil)
	require.NoError(t, err)
	require.Equal(t, operation.StatePending, claimed.State)
	_, err = f.family.Dispatch(ctx, claimed)
	require.NoError(t, err)

	rep, err := svc.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Examined, "the lease still holds")

	f.clock.Advance(f.exec.Lease() + time.Millisecond)
	rep, err = svc.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Examined)
	assert.Equal(t, 1, rep.Transitions)
	lostOp := f.get(t, op.Handle)
	assert.Equal(t, operation.StateUnknown, lostOp.State)
	assert.Equal(t, operation.EventDispatcherLost, lastEvent(lostOp).Type)
	assert.Equal(t, f.clock.Now(), lostOp.DueAt, "probed at once")

	rep, err = svc.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Transitions)
	final := f.get(t, op.Handle)
	assert.Equal(t, operation.StateSucceeded, final.State)
	assert.Equal(t, operation.EventProbeFoundOne, lastEvent(final).Type)

	stats := f.sim.Stats()
	assert.Equal(t, 2, stats.CreateCalls, "the failed first attempt and the dead worker's send; no third")
	assert.Equal(t, 1, stats.ReviewsCommitted)
}

func TestLookupThatKeepsFailingStaysUnknownThenEscalatesToTheOperator(t *testing.T) {
	const budget = 4
	f := newFixture(t, withRecovery(func(r *tools.Recovery) { r.ProbeBudget = budget }))
	svc := f.service(t)
	ctx := context.Background()
	f.faults(t, riskapi.Faults{
		Create: []riskapi.CreateFault{{Mode: riskapi.CreateError500BeforeCommit, Times: 1}},
		Lookup: []riskapi.LookupFault{{Mode: riskapi.LookupTimeout, Times: 1}, {Mode: riskapi.LookupError500, Times: 100}},
	})
	op := f.submit(t, "op-lookupfail-1", orderID(4))
	require.Equal(t, operation.StateUnknown, op.State)

	for i := range budget {
		f.clock.Advance(2 * time.Minute) // past any backoff, well within MaxAge
		res, err := svc.Reconcile(ctx, f.get(t, op.Handle))
		require.NoError(t, err)
		require.Equal(t, operation.EventProbeInconclusive, res.Event)
		got := f.get(t, op.Handle)
		require.Equal(t, operation.StateUnknown, got.State)
		assert.Equal(t, i+1, got.ProbeCount)
		assert.Equal(t, operation.OutcomeProviderStatusUnavailable, got.Outcome)
		assert.Equal(t, time.Second<<i, got.DueAt.Sub(f.clock.Now()), "exponential backoff from 1s")
		assert.Equal(t, reconcile.ResultLookupFailed, lastEvent(got).Result)
	}

	f.clock.Advance(2 * time.Minute)
	res, err := svc.Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	assert.Equal(t, operation.EventProbeBudgetExhausted, res.Event)
	got := f.get(t, op.Handle)
	assert.Equal(t, operation.StateEscalated, got.State)
	assert.Equal(t, "escalated to risk-oncall: 4 probes without proof", got.Escalation)
	for _, ev := range got.Journal {
		assert.NotEqual(t, operation.StateRetryable, ev.To, "never RETRYABLE without authoritative evidence")
	}
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
}

func TestRetryBudgetExhaustedEscalates(t *testing.T) {
	f := newFixture(t, withRecovery(func(r *tools.Recovery) { r.RetryBudget = 1 }))
	svc := f.service(t)
	ctx := context.Background()
	f.faults(t, riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateError500BeforeCommit, Times: 2}}})
	op := f.submit(t, "op-retrybudget1", orderID(5))

	step := func(want operation.EventType) reconcile.Result {
		t.Helper()
		f.clock.Advance(time.Minute)
		res, err := svc.Reconcile(ctx, f.get(t, op.Handle))
		require.NoError(t, err)
		require.Equal(t, want, res.Event, "%+v", res)
		return res
	}
	step(operation.EventProbeNotFound)
	res := step(operation.EventRetryClaimed)
	assert.Equal(t, operation.EventResponseMissing, res.Dispatch, "the single retry also failed")
	step(operation.EventProbeNotFound)
	step(operation.EventRetryBudgetExhausted)

	got := f.get(t, op.Handle)
	assert.Equal(t, operation.StateEscalated, got.State)
	assert.Equal(t, 1, got.RetryCount)
	assert.True(t, strings.HasPrefix(got.Escalation, "escalated to risk-oncall: retry budget of 1 exhausted"), got.Escalation)
	assert.Equal(t, 2, f.sim.Stats().CreateCalls)
	assert.Equal(t, 0, f.sim.Stats().ReviewsCommitted)
}

func TestReconcileRefusesAnOperationOfAnUnknownTool(t *testing.T) {
	f := newFixture(t)
	op := f.toUnknown(t, f.storedOp(t, "op-unknowntool1", orderID(6), time.Minute))
	op.Key.Tool = "create_deployment_ticket"
	_, err := f.service(t).Reconcile(context.Background(), op)
	require.ErrorIs(t, err, reconcile.ErrUnknownTool)
}

func TestProbeWithTooLittleTimeLeftIsSkippedNotCounted(t *testing.T) {
	f := newFixture(t)
	svc := f.service(t)
	op := f.submitUnknown(t, riskapi.CreateDropResponseAfterCommit, "op-shortctx-01", orderID(30))
	f.clock.Advance(riskreviewSettle)

	// Less time left than the fixture's downstream budget (2s) needs.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res, err := svc.Reconcile(ctx, f.get(t, op.Handle))
	require.NoError(t, err)
	assert.True(t, res.Skipped, "%+v", res)
	got := f.get(t, op.Handle)
	assert.Equal(t, op.Version, got.Version, "nothing written")
	assert.Equal(t, 0, got.ProbeCount, "a probe that never asked the provider is not counted")
	assert.Equal(t, 0, f.sim.Stats().LookupCalls)

	res, err = svc.Reconcile(context.Background(), got)
	require.NoError(t, err)
	assert.Equal(t, operation.EventProbeFoundOne, res.Event, "with time, the same probe settles it")
}
