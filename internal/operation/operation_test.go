package operation_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

var t0 = time.Date(2026, 7, 28, 10, 31, 8, 0, time.UTC)

// The whole transition table (docs/design.md, State machine): every
// allowed pair, and its target.
var allowed = map[operation.State]map[operation.EventType]operation.State{
	operation.StatePending: {
		operation.EventCreateSucceeded:  operation.StateSucceeded,
		operation.EventBusinessRejected: operation.StateFailed,
		operation.EventNotDispatched:    operation.StateRetryable,
		operation.EventClientTimeout:    operation.StateUnknown,
		operation.EventResponseMissing:  operation.StateUnknown,
		operation.EventVerifyFailed:     operation.StateUnknown,
		operation.EventDispatcherLost:   operation.StateUnknown,
		operation.EventEvidenceRecorded: operation.StatePending,
	},
	operation.StateUnknown: {
		operation.EventProbeFoundOne:        operation.StateSucceeded,
		operation.EventProbeNotFound:        operation.StateRetryable,
		operation.EventProbeInconclusive:    operation.StateUnknown,
		operation.EventProbeMultiple:        operation.StateEscalated,
		operation.EventProbeBudgetExhausted: operation.StateEscalated,
		operation.EventResendUnsafe:         operation.StateEscalated,
		operation.EventClockSkewExceeded:    operation.StateEscalated,
		operation.EventEvidenceRecorded:     operation.StateUnknown,
	},
	operation.StateRetryable: {
		operation.EventRetryClaimed:         operation.StatePending,
		operation.EventRetryBudgetExhausted: operation.StateEscalated,
		operation.EventEvidenceRecorded:     operation.StateRetryable,
		operation.EventClientCancelled:      operation.StateFailed,
	},
	operation.StateSucceeded: {
		operation.EventAuditClean:        operation.StateSucceeded,
		operation.EventAuditDeferred:     operation.StateSucceeded,
		operation.EventAuditMultiple:     operation.StateEscalated,
		operation.EventAuditExhausted:    operation.StateEscalated,
		operation.EventClockSkewExceeded: operation.StateEscalated,
		operation.EventEvidenceRecorded:  operation.StateSucceeded,
	},
	operation.StateEscalated: {
		operation.EventOperatorSucceeded: operation.StateSucceeded,
		operation.EventOperatorFailed:    operation.StateFailed,
		operation.EventEvidenceRecorded:  operation.StateEscalated,
	},
	operation.StateFailed: {
		// Final: only a stale dispatcher's verified evidence is journalled,
		// an operator's statement that it was removed closes it, and a
		// withdrawal's audit looks without moving it.
		operation.EventEvidenceRecorded: operation.StateFailed,
		operation.EventOperatorFailed:   operation.StateFailed,
		operation.EventAuditClean:       operation.StateFailed,
		operation.EventAuditDeferred:    operation.StateFailed,
		operation.EventAuditExhausted:   operation.StateFailed,
	},
}

func TestTransitionTableAllowsExactlyTheDesignedPairs(t *testing.T) {
	for _, from := range operation.AllStates() {
		for _, ev := range operation.TransitionEvents() {
			want, ok := allowed[from][ev]
			t.Run(fmt.Sprintf("%s_%s", from, ev), func(t *testing.T) {
				got, legal := operation.Next(from, ev)
				assert.Equal(t, ok, legal)
				assert.Equal(t, want, got)

				op := opIn(t, from)
				if from == operation.StateFailed && isAudit(ev) {
					op = withdrawnAwaitingAudit(t)
				}
				if from == operation.StateFailed && ev == operation.EventOperatorFailed {
					// Closing needs an effect reported after the failure
					// (TestAnOperatorClosesAnEffectReportedAfterFailureAndOnlySuchAnEffect).
					var err error
					op, err = op.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(time.Second), ResourceID: "r-1"})
					require.NoError(t, err)
				}
				journalBefore := len(op.Journal)
				next, err := op.Apply(operation.Event{Type: ev, At: t0.Add(time.Second), LeaseUntil: t0.Add(time.Minute)})
				if !ok {
					var te *operation.TransitionError
					require.ErrorAs(t, err, &te)
					assert.ErrorIs(t, err, operation.ErrIllegalTransition)
					assert.Equal(t, from, te.From)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, want, next.State)
				assert.Equal(t, op.Version+1, next.Version)
				last := next.Journal[len(next.Journal)-1]
				assert.Equal(t, ev, last.Type)
				assert.Equal(t, from, last.From)
				assert.Equal(t, want, last.To)
				assert.Len(t, op.Journal, journalBefore, "Apply must not modify the receiver")
			})
		}
	}
}

func TestFailedTakesOnlyEvidenceItsClosingAndAWithdrawalsAuditAndSucceededOnlyItsDuplicateAudit(t *testing.T) {
	audit := map[operation.EventType]bool{
		operation.EventAuditClean: true, operation.EventAuditDeferred: true, operation.EventAuditMultiple: true,
		operation.EventAuditExhausted: true, operation.EventClockSkewExceeded: true, operation.EventEvidenceRecorded: true,
	}
	for _, ev := range operation.TransitionEvents() {
		to, ok := operation.Next(operation.StateFailed, ev)
		if ev == operation.EventEvidenceRecorded || ev == operation.EventOperatorFailed || isAudit(ev) && ev != operation.EventAuditMultiple {
			// A verified effect reported after all is journalled, never
			// dropped, an operator may state it removed, and a withdrawal's
			// audit looks for one; the state stays FAILED.
			assert.True(t, ok, ev)
			assert.Equal(t, operation.StateFailed, to)
			continue
		}
		assert.False(t, ok, "FAILED must be final but accepts %s", ev)
		_, ok = operation.Next(operation.StateSucceeded, ev)
		assert.Equal(t, audit[ev], ok, "SUCCEEDED accepts only the duplicate audit and evidence, not %s", ev)
	}
}

func TestCommitHorizonIsTheLatestDeadlineOfEveryDispatch(t *testing.T) {
	op := newOp(t)
	_, ok := op.CommitHorizon()
	assert.False(t, ok, "a dispatch without a deadline has no horizon")

	op = op.WithCommitDeadline(t0.Add(10 * time.Second))
	h, ok := op.CommitHorizon()
	require.True(t, ok)
	assert.Equal(t, t0.Add(10*time.Second), h)

	unknown, err := op.Apply(operation.Event{Type: operation.EventClientTimeout, At: t0.Add(3 * time.Second)})
	require.NoError(t, err)
	retryable, err := unknown.Apply(operation.Event{Type: operation.EventProbeNotFound, At: t0.Add(20 * time.Second)})
	require.NoError(t, err)
	claimed, err := retryable.Apply(operation.Event{Type: operation.EventRetryClaimed, At: t0.Add(21 * time.Second),
		LeaseUntil: t0.Add(30 * time.Second), CommitDeadline: t0.Add(40 * time.Second)})
	require.NoError(t, err)
	h, ok = claimed.CommitHorizon()
	require.True(t, ok)
	assert.Equal(t, t0.Add(40*time.Second), h)
}

func TestEvidenceIsJournalledWithoutReplacingTheVerifiedEffect(t *testing.T) {
	op := newOp(t)
	done, err := op.Apply(operation.Event{Type: operation.EventCreateSucceeded, At: t0.Add(time.Second), ResourceID: "ticket-2"})
	require.NoError(t, err)
	assert.False(t, done.NeedsReconciliation(), "a first-attempt success needs no audit")
	withEvidence, err := done.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(2 * time.Second),
		ResourceID: "ticket-1", NextAt: t0.Add(2 * time.Second)})
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, withEvidence.State)
	assert.Equal(t, "ticket-2", withEvidence.ResourceID)
	assert.Equal(t, []string{"ticket-2", "ticket-1"}, withEvidence.EffectEvidence())
	assert.True(t, withEvidence.AuditPending(), "a second effect's evidence makes the audit due")
	assert.True(t, withEvidence.NeedsReconciliation())
}

func TestLateTimeoutCannotFollowSuccess(t *testing.T) {
	op := newOp(t)
	done, err := op.Apply(operation.Event{Type: operation.EventCreateSucceeded, At: t0.Add(time.Second), ResourceID: "rv-1"})
	require.NoError(t, err)
	_, err = done.Apply(operation.Event{Type: operation.EventClientTimeout, At: t0.Add(2 * time.Second)})
	require.ErrorIs(t, err, operation.ErrIllegalTransition)
}

func TestOutcomesFollowEvents(t *testing.T) {
	cases := []struct {
		name string
		path []operation.Event
		want operation.Outcome
		due  bool
	}{
		{"created", []operation.Event{{Type: operation.EventCreateSucceeded}}, operation.OutcomeCommittedAndVerified, false},
		{"rejected", []operation.Event{{Type: operation.EventBusinessRejected}}, operation.OutcomeFailedWithoutEffect, false},
		{"timeout", []operation.Event{{Type: operation.EventClientTimeout}}, operation.OutcomeResponseMissing, true},
		{"probe failed", []operation.Event{{Type: operation.EventClientTimeout}, {Type: operation.EventProbeInconclusive}}, operation.OutcomeProviderStatusUnavailable, true},
		{"lagging search", []operation.Event{{Type: operation.EventClientTimeout}, {Type: operation.EventProbeInconclusive, Outcome: operation.OutcomeVerificationInconclusive}}, operation.OutcomeVerificationInconclusive, true},
		{"budget keeps reason", []operation.Event{{Type: operation.EventClientTimeout}, {Type: operation.EventProbeInconclusive, Outcome: operation.OutcomeVerificationInconclusive}, {Type: operation.EventProbeBudgetExhausted}}, operation.OutcomeVerificationInconclusive, false},
		{"two effects", []operation.Event{{Type: operation.EventResponseMissing}, {Type: operation.EventProbeMultiple, Duplicates: 2}}, operation.OutcomeIncidentMultipleEffects, false},
		{"proven absent", []operation.Event{{Type: operation.EventResponseMissing}, {Type: operation.EventProbeNotFound}}, operation.OutcomeFailedWithoutEffect, true},
		{"cancelled while proven unsent", []operation.Event{{Type: operation.EventNotDispatched}, {Type: operation.EventClientCancelled}}, operation.OutcomeFailedWithoutEffect, false},
		{"claimed", []operation.Event{{Type: operation.EventResponseMissing}, {Type: operation.EventProbeNotFound}, {Type: operation.EventRetryClaimed, LeaseUntil: t0.Add(time.Hour)}}, operation.OutcomePending, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := newOp(t)
			var err error
			for i, ev := range tc.path {
				ev.At = t0.Add(time.Duration(i+1) * time.Second)
				op, err = op.Apply(ev)
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, op.Outcome)
			assert.Equal(t, tc.due, !op.DueAt.IsZero())
			assert.Equal(t, tc.due, op.State.NeedsReconciliation())
		})
	}
}

func TestCountersAndEvidenceAreRecorded(t *testing.T) {
	op := newOp(t)
	steps := []operation.Event{
		{Type: operation.EventClientTimeout},
		{Type: operation.EventProbeNotFound, NextAt: t0.Add(time.Minute)},
		{Type: operation.EventRetryClaimed, LeaseUntil: t0.Add(2 * time.Minute)},
		{Type: operation.EventResponseMissing},
		{Type: operation.EventProbeFoundOne, ResourceID: "rv-9", Receipt: "receipt-1"},
	}
	var err error
	for i, ev := range steps {
		ev.At = t0.Add(time.Duration(i+1) * time.Second)
		op, err = op.Apply(ev)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, op.Attempts())
	assert.Equal(t, 1, op.RetryCount)
	assert.Equal(t, 1, op.ClientTimeouts)
	assert.Equal(t, 1, op.ProbeCount, "probes count since the last dispatch")
	assert.Equal(t, "rv-9", op.ResourceID)
	assert.Equal(t, "receipt-1", op.Receipt)
	assert.Equal(t, int64(6), op.Version)
	assert.Len(t, op.Journal, 7)
	assert.False(t, op.Blocked())
}

func TestJournalPastItsBoundIsRefused(t *testing.T) {
	op := newOp(t)
	op.State = operation.StateUnknown
	for len(op.Journal) < operation.MaxJournal {
		op.Journal = append(op.Journal, operation.Event{Type: operation.EventProbeInconclusive, At: t0})
	}
	_, err := op.Apply(operation.Event{Type: operation.EventProbeInconclusive, At: t0})
	require.ErrorIs(t, err, operation.ErrJournalFull)
}

func TestClaimWithoutLeaseIsRefused(t *testing.T) {
	op := opIn(t, operation.StateRetryable)
	_, err := op.Apply(operation.Event{Type: operation.EventRetryClaimed, At: t0})
	require.ErrorIs(t, err, operation.ErrInvalid)
}

func TestNewOperationStartsPendingWithJournal(t *testing.T) {
	op := newOp(t)
	assert.Equal(t, operation.StatePending, op.State)
	assert.Equal(t, int64(1), op.Version)
	assert.Equal(t, t0.Add(30*time.Second), op.DueAt)
	require.Len(t, op.Journal, 2)
	assert.Equal(t, operation.EventIntentRecorded, op.Journal[0].Type)
	assert.Equal(t, operation.EventDispatchStarted, op.Journal[1].Type)
	assert.True(t, op.Blocked())
}

func TestRequestKeyValidation(t *testing.T) {
	cases := []struct {
		name, client, tool, id string
		field                  string
	}{
		{"empty id", "c1", "request_risk_review", "", "operation_id"},
		{"short id", "c1", "request_risk_review", "abc", "operation_id"},
		{"long id", "c1", "request_risk_review", strings.Repeat("a", 129), "operation_id"},
		{"ill-formed id", "c1", "request_risk_review", "op id with spaces", "operation_id"},
		{"unicode id", "c1", "request_risk_review", "opération-1", "operation_id"},
		{"empty client", "", "request_risk_review", "op-00000001", "client_principal"},
		{"control in client", "c\n1", "request_risk_review", "op-00000001", "client_principal"},
		{"overlong client", strings.Repeat("c", 257), "request_risk_review", "op-00000001", "client_principal"},
		{"bad tool", "c1", "Request Review", "op-00000001", "tool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := operation.NewRequestKey(tc.client, "M1", "alice", tc.tool, tc.id)
			var ve *operation.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field)
			assert.ErrorIs(t, err, operation.ErrInvalid)
		})
	}
	k, err := operation.NewRequestKey("c1", "M1", "alice", "request_risk_review", strings.Repeat("a", 128))
	require.NoError(t, err)
	assert.NoError(t, operation.ValidateHandle(k.Handle()))
}

func TestScopedKeysNeverCollideAcrossClientsOrTools(t *testing.T) {
	a := operation.RequestKey{ClientID: "a|1", Tool: "t", OperationID: "op-00000001"}
	b := operation.RequestKey{ClientID: "a", Tool: "1|t", OperationID: "op-00000001"}
	c := operation.RequestKey{ClientID: "a", Tool: "t", OperationID: "op-00000001"}
	assert.NotEqual(t, a.Scoped(), b.Scoped())
	assert.NotEqual(t, a.Handle(), b.Handle())
	assert.NotEqual(t, b.Handle(), c.Handle())
	assert.Equal(t, c.Handle(), operation.RequestKey{ClientID: "a", Tool: "t", OperationID: "op-00000001"}.Handle())
	assert.NotContains(t, c.Handle(), "op-00000001", "the handle must not reveal the caller's key")
}

func TestScopeNamesClientTenantSubjectAndToolUnambiguously(t *testing.T) {
	m1 := operation.RequestKey{ClientID: "support-assistant", TenantID: "M1", Subject: "alice", Tool: "request_risk_review", OperationID: "op-00000001"}
	m2 := m1
	m2.TenantID = "M2"
	none := m1
	none.TenantID = ""
	carol := m1
	carol.Subject = "carol"
	assert.NotEqual(t, m1.Scope(), m2.Scope(), "two tenants on one client are two scopes")
	assert.NotEqual(t, m1.Scope(), none.Scope(), "no tenant is a scope of its own")
	assert.NotEqual(t, m1.Scope(), carol.Scope(), "two users of one tenant on one client are two scopes")
	assert.NotEqual(t, operation.RequestKey{ClientID: "a|M1", Subject: "s", Tool: "t"}.Scope(), operation.RequestKey{ClientID: "a", TenantID: "M1", Subject: "s", Tool: "t"}.Scope(),
		"no choice of client and tenant yields another scope's text")
	assert.NotEqual(t, operation.RequestKey{ClientID: "a", TenantID: "M1|s", Tool: "t"}.Scope(), operation.RequestKey{ClientID: "a", TenantID: "M1", Subject: "s", Tool: "t"}.Scope(),
		"no choice of tenant and subject yields another scope's text")
	assert.NotContains(t, m1.Scope(), m1.OperationID, "the scope is what the key is scoped by, not the key")
	assert.Equal(t, m1.Scope()+"|"+m1.OperationID, m1.Scoped(), "the stored key is the key under its scope")
	assert.Equal(t, "op_vecgxgq4torrefnrknwrtsm6ci", m1.Handle(), "handles are pinned: another scheme would change every stored item's handle, which needs a migration")
	_, err := operation.NewRequestKey("support-assistant", "M1", "", "request_risk_review", "op-00000001")
	assert.ErrorIs(t, err, operation.ErrInvalid, "a key is always some user's")
}

func TestHandleValidation(t *testing.T) {
	for _, h := range []string{"", "op_", "rv-1", "op_ABCDEFGHIJKLMNOPQRSTUVWXYZ", "op_abcdefghijklmnopqrstuvwx19"} {
		assert.ErrorIs(t, operation.ValidateHandle(h), operation.ErrInvalid, h)
	}
}

func TestRequestDigestIsCanonicalAndBindsEveryInput(t *testing.T) {
	base, err := operation.RequestDigest("request_risk_review", "alice", map[string]any{"order_id": "O1", "reason": "r", "n": 1})
	require.NoError(t, err)
	reordered, err := operation.RequestDigest("request_risk_review", "alice", struct {
		N       int    `json:"n"`
		Reason  string `json:"reason"`
		OrderID string `json:"order_id"`
	}{1, "r", "O1"})
	require.NoError(t, err)
	assert.Equal(t, base, reordered, "field order must not matter")
	assert.True(t, strings.HasPrefix(base, "sha256:"))
	for name, other := range map[string][3]any{
		"tool":     {"other_tool", "alice", map[string]any{"order_id": "O1", "reason": "r", "n": 1}},
		"end user": {"request_risk_review", "bob", map[string]any{"order_id": "O1", "reason": "r", "n": 1}},
		"argument": {"request_risk_review", "alice", map[string]any{"order_id": "O1", "reason": "r2", "n": 1}},
	} {
		d, err := operation.RequestDigest(other[0].(string), other[1].(string), other[2])
		require.NoError(t, err)
		assert.NotEqual(t, base, d, name)
	}
}

func TestBusinessKeyRefusesAmbiguousParts(t *testing.T) {
	k, err := operation.NewBusinessKey("risk_review", "O20260728001", "standard", "g1")
	require.NoError(t, err)
	assert.Equal(t, "risk_review|O20260728001|standard|g1", k)
	for _, parts := range [][]string{{}, {""}, {"a|b"}, {strings.Repeat("x", 600)}} {
		_, err := operation.NewBusinessKey("risk_review", parts...)
		assert.ErrorIs(t, err, operation.ErrInvalid, "%q", parts)
	}
}

func TestIntentValidation(t *testing.T) {
	good := intent(t)
	require.NoError(t, good.Validate())
	bad := []func(*operation.Intent){
		func(i *operation.Intent) { i.BusinessKey = "" },
		func(i *operation.Intent) { i.RequestDigest = "md5:abc" },
		func(i *operation.Intent) { i.EndUserID = "" },
		func(i *operation.Intent) { i.Key.OperationID = "x" },
	}
	for n, mutate := range bad {
		in := intent(t)
		mutate(&in)
		_, err := operation.New(in, t0, time.Second)
		assert.True(t, errors.Is(err, operation.ErrInvalid), "case %d: %v", n, err)
	}
}

func intent(t *testing.T) operation.Intent {
	t.Helper()
	key, err := operation.NewRequestKey("client-1", "M1", "alice", "request_risk_review", "op-00000001")
	require.NoError(t, err)
	d, err := operation.RequestDigest(key.Tool, "alice", map[string]string{"order_id": "O1"})
	require.NoError(t, err)
	return operation.Intent{Key: key, BusinessKey: "risk_review|O1|standard|g1", RequestDigest: d, EndUserID: "alice", TenantID: "M1"}
}

func newOp(t *testing.T) operation.Operation {
	t.Helper()
	op, err := operation.New(intent(t), t0, 30*time.Second)
	require.NoError(t, err)
	return op
}

// opIn builds an operation in any state by walking legal events.
// isAudit: an event of the duplicate audit.
func isAudit(ev operation.EventType) bool {
	switch ev {
	case operation.EventAuditClean, operation.EventAuditDeferred, operation.EventAuditMultiple, operation.EventAuditExhausted:
		return true
	}
	return false
}

// withdrawnAwaitingAudit is an operation its owner withdrew while proven
// unsent, with the withdrawal's audit scheduled a minute on.
func withdrawnAwaitingAudit(t *testing.T) operation.Operation {
	t.Helper()
	op, err := opIn(t, operation.StateRetryable).Apply(operation.Event{Type: operation.EventClientCancelled, At: t0, NextAt: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.True(t, op.WithdrawalAuditPending())
	return op
}

func opIn(t *testing.T, s operation.State) operation.Operation {
	t.Helper()
	paths := map[operation.State][]operation.EventType{
		operation.StatePending:   nil,
		operation.StateSucceeded: {operation.EventCreateSucceeded},
		operation.StateFailed:    {operation.EventBusinessRejected},
		operation.StateUnknown:   {operation.EventClientTimeout},
		operation.StateRetryable: {operation.EventNotDispatched},
		operation.StateEscalated: {operation.EventClientTimeout, operation.EventProbeMultiple},
	}
	op := newOp(t)
	for _, ev := range paths[s] {
		var err error
		op, err = op.Apply(operation.Event{Type: ev, At: t0})
		require.NoError(t, err)
	}
	require.Equal(t, s, op.State)
	return op
}

func TestDispatchOutcomeIsTheLatestDispatchsExitFromPending(t *testing.T) {
	op := newOp(t)
	_, ok := op.DispatchOutcome()
	assert.False(t, ok, "still waiting")
	steps := []operation.Event{
		{Type: operation.EventClientTimeout, NextAt: t0.Add(time.Minute)},
		{Type: operation.EventProbeNotFound},
		{Type: operation.EventRetryClaimed, LeaseUntil: t0.Add(time.Hour)},
	}
	var err error
	for i, ev := range steps {
		ev.At = t0.Add(time.Duration(i+1) * time.Second)
		op, err = op.Apply(ev)
		require.NoError(t, err)
	}
	_, ok = op.DispatchOutcome()
	assert.False(t, ok, "the first attempt's timeout says nothing about the claimed re-send")
	op, err = op.Apply(operation.Event{Type: operation.EventResponseMissing, At: t0.Add(5 * time.Second), NextAt: t0.Add(9 * time.Second)})
	require.NoError(t, err)
	ev, ok := op.DispatchOutcome()
	require.True(t, ok)
	assert.Equal(t, operation.EventResponseMissing, ev.Type)
	assert.Equal(t, t0.Add(9*time.Second), ev.NextAt)
	assert.Equal(t, 2, op.Attempts())
}

// A withdrawal (client_cancelled) ends the operation FAILED and releases
// its business key on the caller's word alone, so the next request for the
// same fact makes a new effect. It is allowed only when no create of the
// operation can take effect, now or later: every dispatch never left, or
// was searched for and found absent past the provider's promised commit
// horizon, and no event names an effect. An absence the provider may still
// overtake (an idempotent provider without a commit deadline) is reason
// enough to re-send under the same key, never to give the fact up.
func TestOnlyAnOperationWhoseEveryDispatchIsRuledOutMayBeWithdrawn(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	timedOut := operation.Event{Type: operation.EventClientTimeout, NextAt: at(60)}
	absent := operation.Event{Type: operation.EventProbeNotFound}
	absentPastHorizon := operation.Event{Type: operation.EventProbeNotFound, LateCommitsBounded: true}
	refused := operation.Event{Type: operation.EventNotDispatched}
	claim := operation.Event{Type: operation.EventRetryClaimed, LeaseUntil: at(3600)}
	evidence := operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "rv-1"}

	cases := []struct {
		name  string
		steps []operation.Event
		ruled bool
	}{
		{"the only dispatch was refused before it left", []operation.Event{refused}, true},
		{"every dispatch was refused before it left", []operation.Event{refused, claim, refused}, true},
		{"a timed-out dispatch found absent past the commit horizon", []operation.Event{timedOut, absentPastHorizon}, true},
		{"a timed-out dispatch found absent, late commits unbounded", []operation.Event{timedOut, absent}, false},
		{"an unbounded absence, then a re-send refused before it left", []operation.Event{timedOut, absent, claim, refused}, false},
		{"an unbounded absence, then a re-send found absent past the horizon", []operation.Event{timedOut, absent, claim, timedOut, absentPastHorizon}, true},
		{"a refused dispatch with a stale dispatcher's evidence of an effect", []operation.Event{refused, evidence}, false},
		{"absent past the horizon, evidence recorded since", []operation.Event{timedOut, absentPastHorizon, evidence}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := newOp(t)
			assert.False(t, op.EffectRuledOut(), "a dispatch in flight may take effect")
			for i, ev := range tc.steps {
				ev.At = at(i + 1)
				var err error
				op, err = op.Apply(ev)
				require.NoError(t, err)
			}
			require.Equal(t, operation.StateRetryable, op.State)
			assert.Equal(t, tc.ruled, op.EffectRuledOut())
			_, err := op.Apply(operation.Event{Type: operation.EventClientCancelled, At: at(100)})
			if tc.ruled {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, operation.ErrIllegalTransition, "a withdrawal an effect may overtake")
			}
		})
	}
}

// Evidence journalled on an ESCALATED operation adds to what the operator
// reads; it does not replace why the operator was called (an incident, a
// clock beyond the bound), which every answer about the operation shows.
func TestEvidenceOnAnEscalatedOperationKeepsWhyItWasEscalated(t *testing.T) {
	unknown, err := newOp(t).Apply(operation.Event{Type: operation.EventClientTimeout, At: t0.Add(time.Second)})
	require.NoError(t, err)
	why := "incident: 2 matching effects [rv-1, rv-2]; escalated to risk-oncall; nothing deleted or chosen"
	escalated, err := unknown.Apply(operation.Event{Type: operation.EventProbeMultiple, At: t0.Add(time.Minute), Duplicates: 2, Detail: why})
	require.NoError(t, err)
	require.Equal(t, why, escalated.Escalation)

	withEvidence, err := escalated.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(2 * time.Minute),
		ResourceID: "rv-3", Source: "stale_dispatcher", Detail: "a dispatcher that lost its lease or a race created and verified rv-3"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateEscalated, withEvidence.State)
	assert.Equal(t, why, withEvidence.Escalation)
}

// An effect reported after an operation FAILED is closed by an operator
// stating it was removed (operator_resolved_failed, FAILED stays FAILED):
// only then is nothing reported any more; a later report opens it again.
// Without a reported effect there is nothing to close.
func TestAnOperatorClosesAnEffectReportedAfterFailureAndOnlySuchAnEffect(t *testing.T) {
	failed, err := newOp(t).Apply(operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, operation.StateFailed, failed.State)
	_, err = failed.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(2 * time.Second), Actor: "oscar"})
	require.Error(t, err, "nothing was reported: FAILED stays final")

	reported, err := failed.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(time.Minute), ResourceID: "ticket-9"})
	require.NoError(t, err)
	require.Equal(t, []string{"ticket-9"}, reported.EffectsReportedAfterFailure())

	closed, err := reported.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(2 * time.Minute), Actor: "oscar"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, closed.State)
	assert.Empty(t, closed.EffectsReportedAfterFailure(), "the operator stated it removed")

	again, err := closed.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(3 * time.Minute), ResourceID: "ticket-10"})
	require.NoError(t, err)
	assert.Equal(t, []string{"ticket-10"}, again.EffectsReportedAfterFailure(), "a later report is open again")
}

// A withdrawal's audit is scheduled by the withdrawal, moved on by its own
// events, left where it was by an operator's closing, made due at once by
// a stale dispatcher's evidence, and ended by the audit alone.
func TestAWithdrawalsAuditIsScheduledByTheWithdrawalAndEndedOnlyByTheAudit(t *testing.T) {
	op := withdrawnAwaitingAudit(t)
	assert.True(t, op.NeedsReconciliation())
	assert.Equal(t, t0.Add(time.Minute), op.DueAt)

	deferred, err := op.Apply(operation.Event{Type: operation.EventAuditDeferred, At: t0.Add(time.Minute), NextAt: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, t0.Add(2*time.Minute), deferred.DueAt)

	evidence, err := deferred.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(90 * time.Second), ResourceID: "r-1", NextAt: t0.Add(90 * time.Second)})
	require.NoError(t, err)
	assert.Equal(t, t0.Add(90*time.Second), evidence.DueAt, "evidence makes the audit look at once")
	assert.Equal(t, []string{"r-1"}, evidence.EffectsReportedAfterFailure())

	closed, err := evidence.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(100 * time.Second)})
	require.NoError(t, err)
	assert.Equal(t, evidence.DueAt, closed.DueAt, "an operator's closing does not end the audit")

	clean, err := closed.Apply(operation.Event{Type: operation.EventAuditClean, At: t0.Add(3 * time.Minute)})
	require.NoError(t, err)
	assert.False(t, clean.NeedsReconciliation())
	assert.Equal(t, operation.StateFailed, clean.State)
	assert.Equal(t, operation.OutcomeFailedWithoutEffect, clean.Outcome)

	_, err = clean.Apply(operation.Event{Type: operation.EventAuditDeferred, At: t0.Add(4 * time.Minute), NextAt: t0.Add(5 * time.Minute)})
	assert.ErrorIs(t, err, operation.ErrIllegalTransition, "no audit is pending any more")
	late, err := clean.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(4 * time.Minute), ResourceID: "r-2", NextAt: t0.Add(4 * time.Minute)})
	require.NoError(t, err)
	assert.False(t, late.NeedsReconciliation(), "evidence after the audit is an operator's, not a new audit")
}

// FAILED is final, but its outcome is what is known about the effect: an
// effect reported after it, or a withdrawal's audit that could not finish,
// leaves the absence unproven until an operator closes it, and the outcome
// says so; the operator's closing makes it the failure's again.
func TestAFailedOperationsOutcomeSaysWhenItsAbsenceIsNoLongerProven(t *testing.T) {
	op := withdrawnAwaitingAudit(t)
	require.Equal(t, operation.OutcomeFailedWithoutEffect, op.Outcome)

	exhausted, err := op.Apply(operation.Event{Type: operation.EventAuditExhausted, At: t0.Add(time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, exhausted.State)
	assert.Equal(t, operation.OutcomeVerificationInconclusive, exhausted.Outcome, "a late commit is not ruled out")
	assert.False(t, exhausted.NeedsReconciliation())

	closed, err := exhausted.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(2 * time.Minute), Actor: "oscar"})
	require.NoError(t, err)
	assert.Equal(t, operation.OutcomeFailedWithoutEffect, closed.Outcome, "the operator searched the provider and found nothing")

	reported, err := closed.Apply(operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(3 * time.Minute), ResourceID: "ticket-9"})
	require.NoError(t, err)
	assert.Equal(t, operation.OutcomeVerificationInconclusive, reported.Outcome, "an effect exists that nobody has accounted for")
	assert.Equal(t, reported.Outcome, reported.Journal[len(reported.Journal)-1].Outcome, "the journal records what the event decided")

	removed, err := reported.Apply(operation.Event{Type: operation.EventOperatorFailed, At: t0.Add(4 * time.Minute), Actor: "oscar"})
	require.NoError(t, err)
	assert.Equal(t, operation.OutcomeFailedWithoutEffect, removed.Outcome)
}

// A withdrawal's audit that ends clean or waits changes nothing the
// caller was told.
func TestAWithdrawalAuditThatFindsNothingKeepsTheFailedOutcome(t *testing.T) {
	op := withdrawnAwaitingAudit(t)
	deferred, err := op.Apply(operation.Event{Type: operation.EventAuditDeferred, At: t0.Add(time.Minute), NextAt: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, operation.OutcomeFailedWithoutEffect, deferred.Outcome)
	clean, err := deferred.Apply(operation.Event{Type: operation.EventAuditClean, At: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	assert.Equal(t, operation.OutcomeFailedWithoutEffect, clean.Outcome)
}

// An effect a probe found may be another request's: only that, or an
// operator's word, marks a success as found by search, not an answer to
// the operation's own create.
func TestASuccessIsFoundBySearchOnlyWhenAProbeOrOperatorNamedTheEffect(t *testing.T) {
	unknown := opIn(t, operation.StateUnknown)
	found, err := unknown.Apply(operation.Event{Type: operation.EventProbeFoundOne, At: t0, ResourceID: "r-1"})
	require.NoError(t, err)
	assert.True(t, found.EffectFoundBySearch())

	answered, err := opIn(t, operation.StatePending).Apply(operation.Event{Type: operation.EventCreateSucceeded, At: t0, ResourceID: "r-1"})
	require.NoError(t, err)
	assert.False(t, answered.EffectFoundBySearch())
	assert.False(t, unknown.EffectFoundBySearch(), "not a success yet")
}

// A FAILED operation that was never withdrawn has no audit: the audit's
// events are refused, whatever the NextAt of the event that failed it.
func TestOnlyAWithdrawnOperationIsAuditedAfterItFailed(t *testing.T) {
	op := opIn(t, operation.StatePending)
	failed, err := op.Apply(operation.Event{Type: operation.EventBusinessRejected, At: t0, NextAt: t0.Add(time.Minute)})
	require.NoError(t, err)
	assert.False(t, failed.NeedsReconciliation())
	for _, ev := range []operation.EventType{operation.EventAuditClean, operation.EventAuditDeferred, operation.EventAuditExhausted} {
		_, err := failed.Apply(operation.Event{Type: ev, At: t0.Add(time.Second)})
		assert.ErrorIs(t, err, operation.ErrIllegalTransition, ev)
	}
	withdrawn, err := opIn(t, operation.StateRetryable).Apply(operation.Event{Type: operation.EventClientCancelled, At: t0})
	require.NoError(t, err)
	assert.False(t, withdrawn.NeedsReconciliation(), "a withdrawal of what never left needs no audit")
}
