package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/reconcile"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// A withdrawal trusts the provider's promise that nothing commits past
// the horizon. A provider that breaks it commits the withdrawn create
// after the fact was released, and the next request for the fact makes a
// second ticket. The withdrawn operation is audited a grace past its
// horizon, like a re-send: the late ticket is recorded on it as an effect
// reported after failure, the incident an operator closes.
func TestALateCommitAfterAWithdrawalIsFoundByTheWithdrawalAudit(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)

	next := f.submitAs(t, "deploy-payments-again", "")
	require.Equal(t, operation.StateSucceeded, next.State, "the released fact is asked for again: %+v", next.Journal)

	got := f.drive(t, withdrawn.Handle)

	require.Equal(t, 2, f.tickets(), "the withdrawn create committed late, the next request made its own")
	assert.Equal(t, operation.StateFailed, got.State, "the withdrawal stands: %+v", got.Journal)
	late := got.EffectsReportedAfterFailure()
	require.Len(t, late, 1, "the late ticket is the withdrawn operation's incident: %+v", got.Journal)
	assert.NotEqual(t, f.get(t, next.Handle).ResourceID, late[0], "the next holder's ticket is its own, not the late one")
	assert.False(t, got.NeedsReconciliation(), "the audit is done")
}

// The audit of a withdrawal must not take the next holder's ticket for a
// late commit: the provider keeps no request identity, so a ticket the
// fact's holder names is the holder's. The audit ends clean, and the
// withdrawn operation expires like any other FAILED one.
func TestAWithdrawalAuditLeavesTheNextHoldersTicketAlone(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterAbsence(t, releaseapi.CreateTimeoutBeforeCommit)
	require.True(t, withdrawn.WithdrawalAuditPending(), "a dispatch may have left: the withdrawal is audited")

	next := f.submitAs(t, "deploy-payments-again", "")
	require.Equal(t, operation.StateSucceeded, next.State)

	got := f.drive(t, withdrawn.Handle)

	require.Equal(t, 1, f.tickets())
	assert.Empty(t, got.EffectsReportedAfterFailure(), "journal: %+v", got.Journal)
	assert.True(t, journalHas(got, "duplicate_audit_clean"), "journal: %+v", got.Journal)
	assert.False(t, got.NeedsReconciliation())
}

// While the fact's next holder still waits on its own create, a ticket it
// does not name yet may be its own: the audit waits for it rather than
// report it, and ends clean once the holder's probe names the ticket.
func TestAWithdrawalAuditWaitsWhileTheNextHolderMayNotYetNameItsTicket(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	ctx := context.Background()
	withdrawn := f.withdrawAfterAbsence(t, releaseapi.CreateTimeoutBeforeCommit)
	next := f.submitAs(t, "deploy-payments-again", releaseapi.CreateDropResponseAfterCommit)
	require.Equal(t, operation.StateUnknown, next.State, "the next holder's ticket exists, its answer was lost")
	require.Equal(t, 1, f.tickets())

	if now := f.at(f.reconciler)(); withdrawn.DueAt.After(now) {
		f.base.Advance(withdrawn.DueAt.Sub(now))
	}
	_, err := f.recon.Reconcile(ctx, withdrawn)
	require.NoError(t, err)
	got := f.get(t, withdrawn.Handle)
	assert.Empty(t, got.EffectsReportedAfterFailure(), "the holder's unnamed ticket is not the withdrawn request's: %+v", got.Journal)
	assert.True(t, journalHas(got, "duplicate_audit_deferred"), "journal: %+v", got.Journal)

	require.Equal(t, operation.StateSucceeded, f.drive(t, next.Handle).State)
	got = f.drive(t, withdrawn.Handle)
	assert.Empty(t, got.EffectsReportedAfterFailure(), "journal: %+v", got.Journal)
	assert.True(t, journalHas(got, "duplicate_audit_clean"), "journal: %+v", got.Journal)
}

// A next request that finds the late ticket and takes it as its own
// leaves one ticket for the fact and a holder that names it: nothing to
// report.
func TestANextHolderThatFindsTheLateTicketLeavesTheWithdrawalClean(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)
	next := f.submitAs(t, "deploy-payments-again", releaseapi.CreateTimeoutBeforeCommit)
	require.Equal(t, operation.StateUnknown, next.State)

	holder := f.drive(t, next.Handle)
	require.Equal(t, operation.StateSucceeded, holder.State, "journal: %+v", holder.Journal)
	got := f.drive(t, withdrawn.Handle)

	require.Equal(t, 1, f.tickets(), "the late commit is the fact's one ticket")
	assert.Equal(t, []string{holder.ResourceID}, holder.EffectEvidence())
	assert.Empty(t, got.EffectsReportedAfterFailure(), "journal: %+v", got.Journal)
	assert.False(t, got.NeedsReconciliation())
}

// Nobody asks for the fact again: the late ticket is held by no
// operation, and it is reported on the withdrawn one.
func TestALateCommitAfterAWithdrawalIsReportedWhenNobodyAsksAgain(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)

	got := f.drive(t, withdrawn.Handle)

	require.Equal(t, 1, f.tickets())
	require.Len(t, got.EffectsReportedAfterFailure(), 1, "journal: %+v", got.Journal)
	last := got.Journal[len(got.Journal)-1]
	assert.Contains(t, last.Detail, "not held by any operation")
	assert.Equal(t, operation.StateFailed, got.State)
}

// An index lagging more than usual answers the audit's first search with
// a watermark short of the horizon plus the grace. That answer proves
// nothing about a late commit inside the grace, so the audit waits for
// the index instead of calling the withdrawal clean.
func TestAWithdrawalAuditWaitsForTheIndexToCoverItsGrace(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	withdrawn := f.withdrawAfterBrokenPromise(t, 10*time.Second)
	lag := 15_000
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{SearchLagMS: &lag}))

	got := f.drive(t, withdrawn.Handle)

	require.Equal(t, 1, f.tickets())
	assert.True(t, journalHas(got, "duplicate_audit_deferred"), "the lagging answer was not taken as clean: %+v", got.Journal)
	assert.Len(t, got.EffectsReportedAfterFailure(), 1, "journal: %+v", got.Journal)
}

// The grace is counted on the provider's clock: dispatcher, reconciler and
// provider clocks apart by up to the bound do not let a late commit after
// a withdrawal (10 s past its deadline, the campaign's) go unreported while
// the next request makes its own ticket.
func TestALateCommitAfterAWithdrawalIsFoundWhateverTheClocksWithinTheBound(t *testing.T) {
	const bound = 10 * time.Second
	for _, sk := range []struct{ d, r, p time.Duration }{
		{-10 * time.Second, 0, 0}, {10 * time.Second, 0, 0},
		{0, -10 * time.Second, 0}, {0, 10 * time.Second, 0},
		{0, 0, -10 * time.Second}, {0, 0, 10 * time.Second},
		{-5 * time.Second, 5 * time.Second, -5 * time.Second}, {5 * time.Second, -5 * time.Second, 5 * time.Second},
	} {
		t.Run(fmt.Sprintf("dispatcher%+ds_reconciler%+ds_provider%+ds", int(sk.d.Seconds()), int(sk.r.Seconds()), int(sk.p.Seconds())), func(t *testing.T) {
			f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: bound,
				clocks: clocks{base: testclock.New(t0), dispatcher: sk.d, reconciler: sk.r, provid: sk.p}})
			op := f.submitWithFault(t, releaseapi.CreateCommitLateBeyondDeadline, 10*time.Second)
			op = f.probeUntilSettled(t, op)
			if op.State != operation.StateRetryable {
				// A reconciler behind the provider probes later by the
				// provider's clock: the late commit is already indexed and
				// found; nothing is withdrawn.
				require.Equal(t, operation.StateSucceeded, op.State, "journal: %+v", op.Journal)
				return
			}
			withdrawn := f.withdraw(t, op)
			next := f.submitAs(t, "deploy-payments-again", "")
			require.Equal(t, operation.StateSucceeded, next.State)

			got := f.drive(t, withdrawn.Handle)

			require.Equal(t, 2, f.tickets())
			require.Len(t, got.EffectsReportedAfterFailure(), 1, "journal: %+v", got.Journal)
			assert.NotEqual(t, f.get(t, next.Handle).ResourceID, got.EffectsReportedAfterFailure()[0])
		})
	}
}

// A reconciler whose clock has stepped beyond the bound from the
// provider's cannot judge the watermark against the horizon: the audit
// neither calls the withdrawal clean nor waits for ever, it ends for an
// operator. The operation stays FAILED.
func TestAWithdrawalAuditWhoseClocksDisagreeBeyondTheBoundEndsWithTheOperator(t *testing.T) {
	const bound = 5 * time.Second
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: bound})
	withdrawn := f.withdrawAfterAbsence(t, releaseapi.CreateTimeoutBeforeCommit)
	ahead := f.reconcilerAt(t, bound, 30*time.Second)
	if now := f.at(30 * time.Second)(); withdrawn.DueAt.After(now) {
		f.base.Advance(withdrawn.DueAt.Sub(now))
	}

	res, err := ahead.Reconcile(context.Background(), withdrawn)

	require.NoError(t, err)
	assert.Equal(t, operation.EventAuditExhausted, res.Event)
	got := f.get(t, withdrawn.Handle)
	assert.Equal(t, operation.StateFailed, got.State)
	assert.False(t, got.NeedsReconciliation())
	assert.Contains(t, got.Journal[len(got.Journal)-1].Detail, "withdrawal audit impossible: provider clock")
}

// reconcilerAt is a reconciler over the fixture's table and family whose
// clock is offset from the base, under skew bound.
func (f releaseFixture) reconcilerAt(t *testing.T, bound, offset time.Duration) *reconcile.Service {
	t.Helper()
	cfg := tools.ExecutorConfig{Store: f.st, Clock: f.at(offset),
		Budget: admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: time.Second, Reserve: 100 * time.Millisecond}}
	withSkewBound(&cfg, bound)
	ex, err := tools.NewExecutor(cfg)
	require.NoError(t, err)
	svc, err := reconcile.New(reconcile.Config{Executor: ex, Families: map[string]tools.WriteTool{release.ToolCreate: f.fam},
		Operator: operator, Jitter: identity})
	require.NoError(t, err)
	return svc
}

// withdrawAfterBrokenPromise sends the first create under
// commit_late_beyond_deadline (overrun past its deadline), probes it absent
// past the horizon and withdraws it as its owner: FAILED, the fact
// released, the late commit still to come.
func (f releaseFixture) withdrawAfterBrokenPromise(t *testing.T, overrun time.Duration) operation.Operation {
	t.Helper()
	op := f.withdrawAfterAbsence(t, releaseapi.CreateCommitLateBeyondDeadline, overrun)
	require.Equal(t, 0, f.tickets(), "the late commit has not landed yet")
	return op
}

// withdrawAfterAbsence sends the first create under mode, probes it
// absent past the horizon and withdraws it as its owner.
func (f releaseFixture) withdrawAfterAbsence(t *testing.T, mode releaseapi.CreateMode, overrun ...time.Duration) operation.Operation {
	t.Helper()
	op := f.submitWithFault(t, mode, append(overrun, 0)[0])
	op = f.probeUntilSettled(t, op)
	require.Equal(t, operation.StateRetryable, op.State, "journal: %+v", op.Journal)
	return f.withdraw(t, op)
}

// probeUntilSettled runs the reconciler on an UNKNOWN op at each due time
// until it is UNKNOWN no more.
func (f releaseFixture) probeUntilSettled(t *testing.T, op operation.Operation) operation.Operation {
	t.Helper()
	require.Equal(t, operation.StateUnknown, op.State)
	for step := 0; op.State == operation.StateUnknown; step++ {
		require.Less(t, step, 30, "the probe never settled")
		if now := f.at(f.reconciler)(); op.DueAt.After(now) {
			f.base.Advance(op.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(context.Background(), op)
		require.NoError(t, err)
		op = f.get(t, op.Handle)
	}
	return op
}

// withdraw cancels op's task as its owner and requires the withdrawal.
func (f releaseFixture) withdraw(t *testing.T, op operation.Operation) operation.Operation {
	t.Helper()
	ts, ids := f.releaseTasks(t)
	decision, err := ts.Cancel(context.Background(), ids.For(op.Handle, op.CreatedAt))
	require.NoError(t, err)
	require.True(t, decision.Withdrawn, "reason: %s", decision.Reason)
	op = f.get(t, op.Handle)
	require.Equal(t, operation.StateFailed, op.State)
	return op
}

// releaseTasks is the tasks service over the dispatcher's executor, for
// the owner's withdrawals.
func (f releaseFixture) releaseTasks(t *testing.T) (*tasks.Service, tasks.IDs) {
	t.Helper()
	ids, err := tasks.NewIDs([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	ts, err := tasks.New(tasks.Config{Executor: f.disp, Tools: []tools.Published{f.fam}, IDs: ids, Retention: time.Hour,
		Caller: func(context.Context) (tools.Caller, bool) { return deployer, true }})
	require.NoError(t, err)
	return ts, ids
}

// submitAs asks for the fixture's ticket under another operation_id, its
// create drawing mode ("" for none).
func (f releaseFixture) submitAs(t *testing.T, operationID string, mode releaseapi.CreateMode) operation.Operation {
	t.Helper()
	var faults releaseapi.Faults
	if mode != "" {
		faults.Create = []releaseapi.CreateFault{{Mode: mode, Times: 1}}
	}
	require.NoError(t, f.sim.SetFaults(faults))
	args, err := json.Marshal(map[string]string{"service": "payments-api", "commit": "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234",
		"environment": "production-eu", "operation_id": operationID})
	require.NoError(t, err)
	sub, err := f.disp.Submit(context.Background(), f.fam, deployer, args, "")
	require.NoError(t, err)
	return sub.Operation
}

// The fact's holder is read to tell its ticket from a late one. A holder
// item nobody can read (a hand edit in the console, a newer build's state
// before a rollback) must not keep the withdrawal's audit failing on
// every sweep for ever: each failed read spends one of the audit's
// searches, and the budget ends with an operator, told why.
func TestAWithdrawalAuditWhoseHolderCannotBeReadEndsWithTheOperator(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	ctx := context.Background()
	withdrawn := f.withdrawAfterAbsence(t, releaseapi.CreateTimeoutBeforeCommit)
	next := f.submitAs(t, "deploy-payments-again", "")
	require.Equal(t, operation.StateSucceeded, next.State)
	corruptItem(t, f.st.Table(), next.Handle, "version", "1")

	op := withdrawn
	for pass := 0; op.NeedsReconciliation(); pass++ {
		require.Less(t, pass, 30, "the audit never ended: %+v", op.Journal)
		if now := f.at(f.reconciler)(); op.DueAt.After(now) {
			f.base.Advance(op.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(ctx, op)
		require.NoError(t, err, "pass %d: the unreadable holder is the audit's to record, not an error on every sweep", pass)
		op = f.get(t, withdrawn.Handle)
	}

	assert.Equal(t, operation.StateFailed, op.State)
	assert.True(t, op.WithdrawalAuditEscalated(), "journal: %+v", op.Journal)
	last := op.Journal[len(op.Journal)-1].Detail
	assert.Contains(t, last, "the operation holding the fact could not be read")
	for _, ev := range op.Journal {
		assert.NotContains(t, ev.Detail, next.Handle, "the journal, shown to the owner, does not name the holder (%s)", ev.Type)
	}
}
