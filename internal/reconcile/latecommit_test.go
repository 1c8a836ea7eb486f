package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/testclock"
	"github.com/intentgate/intentgate/internal/tools/release"
)

func journalHas(op operation.Operation, evType string) bool {
	for _, ev := range op.Journal {
		if string(ev.Type) == evType {
			return true
		}
	}
	return false
}

// The create reaches the provider, our wait ends (UNKNOWN), and the
// provider commits the FIRST request later, but within the commit deadline
// it promised to honour. Absence must not be proven before that deadline is
// indexed, so the late ticket is found and nothing is sent twice.
func TestLateCommitWithinTheProviderPromiseIsFoundNotDuplicated(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.submitWithFault(t, releaseapi.CreateCommitLateWithinDeadline, 0)
	require.Equal(t, operation.StateUnknown, op.State)

	got := f.drive(t, op.Handle)

	assert.Equal(t, 1, f.tickets(), "one intent, one ticket")
	assert.Equal(t, 1, f.sim.Stats().CreateCalls, "the late commit was found, never re-sent")
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.Equal(t, operation.OutcomeCommittedAndVerified, got.Outcome)
}

// The provider breaks its promise: the first create commits after its
// deadline, after absence was proven and the re-send succeeded. The
// duplicate audit, one more search once the commit horizon has passed,
// finds both tickets and turns the operation into the incident; the
// dependent approval stays blocked.
func TestLateCommitBeyondThePromiseBecomesAnIncidentAtTheDuplicateAudit(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.submitWithFault(t, releaseapi.CreateCommitLateBeyondDeadline, 5*time.Second)
	require.Equal(t, operation.StateUnknown, op.State)

	got := f.drive(t, op.Handle)

	require.Equal(t, 2, f.tickets(), "the provider committed the first create late")
	assert.Equal(t, operation.StateEscalated, got.State, "a second effect must never stay hidden behind SUCCEEDED")
	assert.Equal(t, operation.OutcomeIncidentMultipleEffects, got.Outcome)
	assert.Equal(t, 2, got.DuplicateResources)
	assert.True(t, got.Blocked())
	assert.True(t, journalHas(got, "duplicate_audit_multiple_effects"), "journal: %+v", got.Journal)

	_, err := f.fam.Approve(deployer, got)
	var fail interface{ Error() string }
	require.ErrorAs(t, err, &fail)
	assert.Contains(t, err.Error(), "multiple tickets exist")
}

// The audit is due after every re-send: until it is clean, approval waits.
func TestApprovalWaitsForTheDuplicateAuditAfterAResend(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.submitWithFault(t, releaseapi.CreateTimeoutBeforeCommit, 0)
	ctx := context.Background()
	for step := 0; ; step++ {
		require.Less(t, step, 30)
		cur := f.get(t, op.Handle)
		if cur.State == operation.StateSucceeded {
			require.True(t, cur.AuditPending(), "a re-sent create stays due for its duplicate audit")
			_, err := f.fam.Approve(deployer, cur)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "duplicate audit")
			break
		}
		if now := f.at(f.reconciler)(); cur.DueAt.After(now) {
			f.base.Advance(cur.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(ctx, cur)
		require.NoError(t, err)
	}
	got := f.drive(t, op.Handle)
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.False(t, got.AuditPending())
	assert.True(t, journalHas(got, "duplicate_audit_clean"))
	assert.Equal(t, 1, f.tickets())
	approval, err := f.fam.Approve(deployer, got)
	require.NoError(t, err)
	assert.Equal(t, got.ResourceID, approval.TicketID)
}

// A provider that neither deduplicates nor bounds late commits: proven
// absence is escalated to the operator, never re-sent.
func TestProviderWithoutCommitGuaranteeEscalatesInsteadOfResending(t *testing.T) {
	rec := release.RecoveryForLag(time.Second)
	rec.CommitDeadline = false
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, recovery: rec})
	op := f.submitWithFault(t, releaseapi.CreateTimeoutBeforeCommit, 0)

	got := f.drive(t, op.Handle)

	assert.Equal(t, operation.StateEscalated, got.State)
	assert.True(t, journalHas(got, "resend_unsafe"), "journal: %+v", got.Journal)
	assert.Equal(t, 1, f.sim.Stats().CreateCalls, "never sent twice")
	assert.Equal(t, 0, f.tickets())
}

// The skew scenario: the dispatcher's clock 10 s behind the
// reconciler and the provider. A search at the instant of the send must not
// count as authoritative for a create that commits later.
func TestDispatcherTenSecondsBehindDoesNotDuplicateALateCommit(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 30 * time.Second,
		clocks: clocks{base: testclock.New(t0), dispatcher: -10 * time.Second}})
	op := f.submitWithFault(t, releaseapi.CreateCommitLateWithinDeadline, 0)

	got := f.drive(t, op.Handle)

	assert.Equal(t, 1, f.tickets())
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
	assert.Equal(t, operation.StateSucceeded, got.State)
}

// Dispatcher, reconciler and provider clocks skewed by up to ±30 s within
// a 30 s bound: whatever the provider does with the first create, there is
// never a second ticket and the operation settles with the one it has.
func TestClocksSkewedWithinTheBoundNeverDuplicate(t *testing.T) {
	const bound = 30 * time.Second
	skews := []struct{ d, r, p time.Duration }{
		{-30 * time.Second, 0, 0}, {30 * time.Second, 0, 0},
		{0, -30 * time.Second, 0}, {0, 30 * time.Second, 0},
		{0, 0, -30 * time.Second}, {0, 0, 30 * time.Second},
		{-15 * time.Second, 15 * time.Second, -15 * time.Second}, {15 * time.Second, -15 * time.Second, 15 * time.Second},
	}
	modes := []releaseapi.CreateMode{releaseapi.CreateCommitLateWithinDeadline, releaseapi.CreateDropResponseAfterCommit, releaseapi.CreateTimeoutBeforeCommit}
	for _, sk := range skews {
		for _, mode := range modes {
			t.Run(fmt.Sprintf("dispatcher%+ds_reconciler%+ds_provider%+ds_%s", int(sk.d.Seconds()), int(sk.r.Seconds()), int(sk.p.Seconds()), mode), func(t *testing.T) {
				f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: bound,
					clocks: clocks{base: testclock.New(t0), dispatcher: sk.d, reconciler: sk.r, provid: sk.p}})
				op := f.submitWithFault(t, mode, 0)
				got := f.drive(t, op.Handle)
				assert.Equal(t, 1, f.tickets(), "exactly one ticket")
				assert.Equal(t, operation.StateSucceeded, got.State, "journal: %+v", got.Journal)
				assert.Equal(t, operation.OutcomeCommittedAndVerified, got.Outcome)
			})
		}
	}
}

// Beyond the bound no timestamp comparison between the two clocks may
// decide: the operation escalates (and is never duplicated).
func TestClocksSkewedBeyondTheBoundEscalate(t *testing.T) {
	const bound = 5 * time.Second
	for _, sk := range []struct {
		name    string
		d, r, p time.Duration
	}{
		{"provider_30s_ahead_of_reconciler", 0, 0, 30 * time.Second},
		{"provider_30s_behind_reconciler", 0, 0, -30 * time.Second},
		{"dispatcher_30s_ahead_of_reconciler", 30 * time.Second, 0, 30 * time.Second},
	} {
		t.Run(sk.name, func(t *testing.T) {
			f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: bound,
				clocks: clocks{base: testclock.New(t0), dispatcher: sk.d, reconciler: sk.r, provid: sk.p}})
			op := f.submitWithFault(t, releaseapi.CreateCommitLateWithinDeadline, 0)
			got := f.drive(t, op.Handle)
			assert.LessOrEqual(t, f.tickets(), 1)
			assert.Equal(t, 1, f.sim.Stats().CreateCalls)
			assert.Equal(t, operation.StateEscalated, got.State, "journal: %+v", got.Journal)
			assert.True(t, journalHas(got, "clock_skew_exceeded"), "journal: %+v", got.Journal)
		})
	}
}

// Fence before send: a grant whose lease cannot cover the whole downstream
// wait is not sent.
func TestDispatcherWithoutLeaseForTheWholeWaitDoesNotSend(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.storedTicketOp(t, 500*time.Millisecond) // downstream budget is 1s

	next, _, err := f.disp.Dispatch(context.Background(), f.fam, op)
	require.NoError(t, err)

	assert.Equal(t, 0, f.sim.Stats().CreateCalls, "nothing may leave without lease for the whole wait")
	assert.Equal(t, operation.StateRetryable, next.State)
}

// Fence before send: a dispatcher whose grant is no longer the current
// version (the reconciler expired its lease) does not send.
func TestDispatcherWhoseGrantIsStaleDoesNotSend(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.storedTicketOp(t, 10*time.Second)
	f.base.Advance(11 * time.Second)
	res, err := f.recon.Reconcile(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, operation.EventDispatcherLost, res.Event)

	next, _, err := f.disp.Dispatch(context.Background(), f.fam, op)
	require.ErrorIs(t, err, store.ErrStale)

	assert.Equal(t, 0, f.sim.Stats().CreateCalls)
	assert.Equal(t, operation.StateUnknown, next.State, "the later state wins")
}

// A dispatcher that loses its lease while its create succeeds journals the
// verified ticket id on the current version instead of dropping it; the
// reconciler uses it.
func TestStaleDispatcherJournalsItsVerifiedTicketOnTheCurrentVersion(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.storedTicketOp(t, 10*time.Second)
	lose := &leaseLoser{ReleaseAPI: f.client, lose: func() {
		// While the create is in flight the lease runs out (a stalled
		// dispatcher) and the reconciler takes over.
		f.base.Advance(11 * time.Second)
		res, err := f.recon.Reconcile(context.Background(), f.get(t, op.Handle))
		require.NoError(t, err)
		require.Equal(t, operation.EventDispatcherLost, res.Event)
	}}
	slow := release.New(lose, nil, release.RecoveryForLag(time.Second))

	_, _, err := f.disp.Dispatch(context.Background(), slow, op)
	require.Error(t, err, "the dispatcher lost the race")

	cur := f.get(t, op.Handle)
	require.Equal(t, operation.StateUnknown, cur.State)
	var evidence []operation.Event
	for _, ev := range cur.Journal {
		if ev.Source == "stale_dispatcher" {
			evidence = append(evidence, ev)
		}
	}
	require.Len(t, evidence, 1, "the verified ticket id is journalled, not only logged: %+v", cur.Journal)
	assert.Equal(t, "ticket-9001", evidence[0].ResourceID)

	got := f.drive(t, op.Handle)
	assert.Equal(t, operation.StateSucceeded, got.State)
	assert.Equal(t, "ticket-9001", got.ResourceID)
	assert.Equal(t, 1, f.tickets())
}

// leaseLoser is the real Release API whose create answer arrives only
// after lose ran (the dispatcher stalled past its lease).
type leaseLoser struct {
	release.ReleaseAPI
	lose func()
}

func (l *leaseLoser) CreateTicket(ctx context.Context, in provider.TicketInput) (provider.Ticket, error) {
	t, err := l.ReleaseAPI.CreateTicket(ctx, in)
	l.lose()
	return t, err
}

// journal writes ev on the current version of handle, as a stale
// dispatcher's evidence would arrive.
func (f releaseFixture) journal(t *testing.T, handle string, ev operation.Event) operation.Operation {
	t.Helper()
	next, err := f.st.Transition(context.Background(), f.get(t, handle), ev)
	require.NoError(t, err)
	return next
}

// A first-attempt success needs no audit, and approve_rollout may approve
// it. Then a stale dispatcher's evidence of another ticket arrives: the
// audit reads that id back, raises the incident and flags that an approval
// may already have been given.
func TestStaleEvidenceOfASecondTicketAfterSuccessBecomesAnIncident(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.storedTicketOp(t, 10*time.Second)
	done, _, err := f.disp.Dispatch(context.Background(), f.fam, op)
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, done.State)
	require.False(t, done.AuditPending(), "one attempt, nothing to audit")
	_, err = f.fam.Approve(deployer, done)
	require.NoError(t, err, "approvable")

	other, err := f.client.CreateTicket(context.Background(), provider.TicketInput{Service: "payments-api", Commit: "8bc911d0a3c4e5f60718293a4b5c6d7e8f901234", Environment: "production-eu", RequestedBy: "dana"})
	require.NoError(t, err)
	now := f.at(f.dispatcher)()
	withEvidence := f.journal(t, op.Handle, operation.Event{Type: operation.EventEvidenceRecorded, At: now, NextAt: now,
		Source: "stale_dispatcher", ResourceID: other.TicketID})
	require.True(t, withEvidence.AuditPending())
	_, err = f.fam.Approve(deployer, withEvidence)
	require.Error(t, err, "approval waits for the audit")

	got := f.drive(t, op.Handle)
	assert.Equal(t, operation.StateEscalated, got.State)
	assert.Equal(t, operation.OutcomeIncidentMultipleEffects, got.Outcome)
	assert.Contains(t, got.Escalation, "an approval of a dependent action may already have been given")
}

// Evidence of an effect on an operation whose absence was proven: the
// reconciler must not re-send (that could be a second effect).
func TestRetryableWithEffectEvidenceEscalatesInsteadOfResending(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second})
	op := f.submitWithFault(t, releaseapi.CreateTimeoutBeforeCommit, 0)
	ctx := context.Background()
	for step := 0; f.get(t, op.Handle).State != operation.StateRetryable; step++ {
		require.Less(t, step, 20)
		cur := f.get(t, op.Handle)
		if now := f.at(f.reconciler)(); cur.DueAt.After(now) {
			f.base.Advance(cur.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(ctx, cur)
		require.NoError(t, err)
	}
	now := f.at(f.dispatcher)()
	f.journal(t, op.Handle, operation.Event{Type: operation.EventEvidenceRecorded, At: now, NextAt: now,
		Source: "stale_dispatcher", ResourceID: "ticket-9999"})

	got := f.drive(t, op.Handle)
	assert.Equal(t, operation.StateEscalated, got.State)
	assert.Contains(t, got.Escalation, "effect evidence [ticket-9999]")
	assert.Equal(t, 1, f.sim.Stats().CreateCalls, "never re-sent")
}
