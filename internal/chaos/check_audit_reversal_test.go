package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// A SUCCEEDED answer given after the audit had raised the incident (a
// replay answered from stale state) is no answer the audit's window
// excuses.
func TestCheckerFlagsASucceededAnswerGivenAfterTheAuditRaisedTheIncident(t *testing.T) {
	ev := auditedIncident(t)
	// The audit raised the incident at t0+1m; the SUCCEEDED answer starts
	// 30 s later (a replay answered from stale state).
	ev.History.Calls[0].Start, ev.History.Calls[0].End = t0.Add(90*time.Second), t0.Add(91*time.Second)
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer, "SUCCEEDED answered 30 s after the table said ESCALATED")
}

// Same, with no later call: the final-state check judges it.
func TestCheckerFlagsASucceededAnswerGivenAfterTheIncidentThatNothingLaterContradicts(t *testing.T) {
	ev := auditedIncident(t)
	ev.History.Calls = ev.History.Calls[:1]
	ev.History.Calls[0].Start, ev.History.Calls[0].End = t0.Add(90*time.Second), t0.Add(91*time.Second)
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer)
}

// An extra send of the server's own (an own replay sent again) that a
// duplicate audit turned into an incident is excused by invariant 3 when
// the answer came while that audit was due: the journal cannot tell it from
// a provider's broken promise. Invariant 1 catches it, through the
// simulator's count of the promises it broke.
func TestAnExtraSendAnAuditTurnedIntoAnIncidentIsInvariantOnes(t *testing.T) {
	ev := auditedIncident(t)
	op := *ev.Ops[0].Final
	j := append([]operation.Event(nil), op.Journal[:6]...)
	j = append(j,
		operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(5 * time.Second), From: operation.StateSucceeded, To: operation.StateSucceeded,
			ResourceID: "rv-2", NextAt: t0.Add(5 * time.Second), Source: "stale_dispatcher"},
		operation.Event{Type: operation.EventAuditMultiple, At: t0.Add(6 * time.Second), From: operation.StateSucceeded, To: operation.StateEscalated,
			Duplicates: 2, Detail: "incident: duplicate audit found 2 matching effects [rv-1, rv-2]"})
	op.Journal, op.Version = j, int64(len(j)-1)
	ev.Ops[0].Final = &op
	ev.History.Calls[1].Start, ev.History.Calls[1].End = t0.Add(10*time.Second), t0.Add(11*time.Second)
	require.NotContains(t, invariantsOf(Check(ev)), InvFirstAnswer)

	// As a ticket key with no broken promise, invariant 1 flags it.
	ev.EffectsByKey = map[string][]string{"0/ticket|svc|abc|staging": {"rv-1", "rv-2"}}
	ev.Ops[0].EffectKey = "ticket|svc|abc|staging"
	require.Contains(t, invariantsOf(Check(ev)), InvOneEffect)
}

// A ticket a probe found after one dispatch has its audit too; its
// reversal is the design's as a re-send's is.
func TestCheckerAcceptsTheAuditReversalOfATicketFoundBySearch(t *testing.T) {
	ev := auditedIncident(t)
	op := *ev.Ops[0].Final
	op.Journal = []operation.Event{
		{Type: operation.EventIntentRecorded, At: t0, To: operation.StatePending},
		{Type: operation.EventDispatchStarted, At: t0, From: operation.StatePending, To: operation.StatePending},
		{Type: operation.EventClientTimeout, At: t0, From: operation.StatePending, To: operation.StateUnknown},
		{Type: operation.EventProbeFoundOne, At: t0.Add(2 * time.Second), From: operation.StateUnknown, To: operation.StateSucceeded,
			ResourceID: "rv-1", NextAt: t0.Add(time.Minute)},
		{Type: operation.EventAuditMultiple, At: t0.Add(time.Minute), From: operation.StateSucceeded, To: operation.StateEscalated, Duplicates: 2},
	}
	op.RetryCount, op.Version = 0, int64(len(op.Journal)-1)
	ev.Ops[0].Final = &op
	require.NotContains(t, invariantsOf(Check(ev)), InvFirstAnswer, "the found ticket's audit reversal is the design's, like a re-send's")
}
