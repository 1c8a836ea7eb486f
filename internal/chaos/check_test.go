package chaos

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
)

// The checker must be able to fail: each invariant is fed a history that
// breaks it, and a clean history that does not.

var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func succeededOp(handle, resource string) operation.Operation {
	return operation.Operation{
		Handle: handle, State: operation.StateSucceeded, Outcome: operation.OutcomeCommittedAndVerified, Version: 2,
		TenantID: "M1", ResourceID: resource, Payload: map[string]string{"order_id": "O20260728001", "reason": "velocity"},
		Key: operation.RequestKey{ClientID: "support-assistant", Tool: toolRisk, OperationID: "op-00000001"},
		Journal: []operation.Event{
			{Type: operation.EventIntentRecorded, At: t0, To: operation.StatePending},
			{Type: operation.EventDispatchStarted, At: t0, From: operation.StatePending, To: operation.StatePending},
			{Type: operation.EventCreateSucceeded, At: t0.Add(time.Second), From: operation.StatePending, To: operation.StateSucceeded, ResourceID: resource},
		},
	}
}

func cleanEvidence() Evidence {
	handle := handleOf("support-assistant", "M1", "alice", toolRisk, "op-00000001")
	op := succeededOp(handle, "rv-1")
	return Evidence{
		Seed: 7,
		Ops: []OpRecord{{Cell: 0, Handle: handle, Persona: "ALICE", Tenant: "M1", ClientID: "support-assistant",
			Tool: toolRisk, OperationID: "op-00000001", EffectKey: "risk|O20260728001", Final: &op, BusinessKeyHolder: handle}},
		EffectsByKey: map[string][]string{"0/risk|O20260728001": {"rv-1"}},
		RiskByHandle: map[string][]string{"0/" + handle: {"rv-1"}},
		MaxInFlight:  map[string]int{"0/risk": 2}, InFlightCap: map[string]int{"0/risk": 4},
		MaxQueueWait: 200 * time.Millisecond, OverloadSlack: time.Second,
		History: History{Calls: []Call{{
			Seq: 1, Persona: "ALICE", Tool: toolRisk, OperationID: "op-00000001",
			Args:  map[string]any{"order_id": "O20260728001", "reason": "velocity", "operation_id": "op-00000001"},
			Start: t0, End: t0.Add(time.Second), Status: "SUCCEEDED", Handle: handle, ResourceID: "rv-1",
		}}},
	}
}

func invariantsOf(vs []Violation) []int {
	var out []int
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestCheckerPassesAConsistentHistory(t *testing.T) {
	require.Empty(t, Check(cleanEvidence()))
}

func TestCheckerFlagsASecondEffectForOneBusinessKey(t *testing.T) {
	ev := cleanEvidence()
	ev.EffectsByKey["0/risk|O20260728001"] = []string{"rv-1", "rv-2"}
	require.Contains(t, invariantsOf(Check(ev)), InvOneEffect)
}

func TestCheckerAcceptsSeveralEffectsNamedByAnEscalatedIncident(t *testing.T) {
	ev := cleanEvidence()
	ev.EffectsByKey["0/risk|O20260728001"] = []string{"rv-1", "rv-2"}
	op := *ev.Ops[0].Final
	op.Journal = append(op.Journal[:2:2], operation.Event{Type: operation.EventResponseMissing, At: t0, From: operation.StatePending, To: operation.StateUnknown},
		operation.Event{Type: operation.EventProbeMultiple, At: t0, From: operation.StateUnknown, To: operation.StateEscalated})
	op.State, op.Outcome, op.DuplicateResources, op.Version = operation.StateEscalated, operation.OutcomeIncidentMultipleEffects, 2, 3
	ev.Ops[0].Final = &op
	ev.History.Calls = nil
	require.NotContains(t, invariantsOf(Check(ev)), InvOneEffect)
}

func TestCheckerFlagsAnOperationLeftUnknown(t *testing.T) {
	ev := cleanEvidence()
	op := *ev.Ops[0].Final
	op.Journal = append(op.Journal[:2:2], operation.Event{Type: operation.EventClientTimeout, At: t0, From: operation.StatePending, To: operation.StateUnknown})
	op.State = operation.StateUnknown
	ev.Ops[0].Final = &op
	require.Contains(t, invariantsOf(Check(ev)), InvSettled)
}

func TestCheckerFlagsAReplayThatNamesAnotherHandle(t *testing.T) {
	ev := cleanEvidence()
	again := ev.History.Calls[0]
	again.Seq, again.Start, again.End, again.Handle = 2, t0.Add(2*time.Second), t0.Add(3*time.Second), "op_other"
	ev.History.Calls = append(ev.History.Calls, again)
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer)
}

func TestCheckerFlagsChangedArgumentsThatWereNotAConflict(t *testing.T) {
	ev := cleanEvidence()
	changed := ev.History.Calls[0]
	changed.Seq, changed.Start, changed.End = 2, t0.Add(2*time.Second), t0.Add(3*time.Second)
	changed.Args = map[string]any{"order_id": "O20260728001", "reason": "other", "operation_id": "op-00000001"}
	ev.History.Calls = append(ev.History.Calls, changed)
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer)

	changed.Code, changed.Status, changed.Handle = "IDEMPOTENCY_CONFLICT", "", ""
	ev.History.Calls[1] = changed
	require.Empty(t, Check(ev))
}

func TestCheckerFlagsSucceededWithoutItsEffectAndFailedWithOne(t *testing.T) {
	ev := cleanEvidence()
	ev.RiskByHandle["0/"+ev.Ops[0].Handle] = nil
	require.Contains(t, invariantsOf(Check(ev)), InvEffectMatches)

	ev = cleanEvidence()
	op := *ev.Ops[0].Final
	op.Journal = append(op.Journal[:2:2], operation.Event{Type: operation.EventBusinessRejected, At: t0, From: operation.StatePending, To: operation.StateFailed})
	op.State, op.ResourceID = operation.StateFailed, ""
	ev.Ops[0].Final = &op
	ev.History.Calls = nil
	require.Contains(t, invariantsOf(Check(ev)), InvEffectMatches)
}

func TestCheckerFlagsAnIllegalStepAndAVersionGoingBack(t *testing.T) {
	ev := cleanEvidence()
	op := *ev.Ops[0].Final
	op.Journal = append(op.Journal[:2:2], operation.Event{Type: operation.EventProbeFoundOne, At: t0, From: operation.StatePending, To: operation.StateSucceeded})
	ev.Ops[0].Final = &op
	require.Contains(t, invariantsOf(Check(ev)), InvJournal)

	ev = cleanEvidence()
	later := *ev.Ops[0].Final
	earlier := later
	earlier.Version = 3
	ev.History.Snapshots = map[string][]Snapshot{later.Handle: {{Seq: 1, Op: earlier}}}
	require.Contains(t, invariantsOf(Check(ev)), InvJournal)
}

func TestCheckerFlagsAnAnswerShowingAnotherTenantsOperation(t *testing.T) {
	ev := cleanEvidence()
	ev.History.Calls = append(ev.History.Calls, Call{Seq: 2, Persona: "BOB", Tool: toolRiskStatus,
		Args: map[string]any{"review_id": ev.Ops[0].Handle}, Start: t0, End: t0, Status: "SUCCEEDED", Handle: ev.Ops[0].Handle})
	require.Contains(t, invariantsOf(Check(ev)), InvTenantIsolated)
}

func TestCheckerFlagsTooManyInFlightAndASlowOverload(t *testing.T) {
	ev := cleanEvidence()
	ev.MaxInFlight["0/risk"] = 5
	require.Contains(t, invariantsOf(Check(ev)), InvBackpressure)

	ev = cleanEvidence()
	ev.History.Calls = append(ev.History.Calls, Call{Seq: 2, Persona: "ALICE", Tool: toolGetOp, Start: t0, End: t0.Add(5 * time.Second),
		Code: "OVERLOADED", RetryAllowed: true, IsError: true})
	require.Contains(t, invariantsOf(Check(ev)), InvBackpressure)
}

func TestViolationPrintoutNamesSeedInvariantAndHistory(t *testing.T) {
	ev := cleanEvidence()
	ev.EffectsByKey["0/risk|O20260728001"] = []string{"rv-1", "rv-2"}
	vs := Check(ev)
	require.NotEmpty(t, vs)
	var out bytes.Buffer
	PrintViolation(&out, ev, vs[0])
	require.Contains(t, out.String(), "seed=7")
	require.Contains(t, out.String(), "invariant 1")
	require.Contains(t, out.String(), "#1 ") // the call
	require.Contains(t, out.String(), "create_succeeded")
}

func TestCheckerAcceptsOtherArgumentsAnsweredBeforeTheOperationExisted(t *testing.T) {
	ev := cleanEvidence()
	op := *ev.Ops[0].Final
	op.CreatedAt = t0.Add(10 * time.Second)
	ev.Ops[0].Final = &op
	early := ev.History.Calls[0]
	early.Seq, early.Start, early.End, early.Deduplicated, early.Handle = 0, t0, t0.Add(time.Second), true, "op_other"
	early.Args = map[string]any{"order_id": "O20260728001", "reason": "other", "operation_id": "op-00000001"}
	late := ev.History.Calls[0]
	late.Start, late.End = t0.Add(11*time.Second), t0.Add(12*time.Second)
	ev.History.Calls = []Call{early, late}
	for _, v := range Check(ev) {
		require.NotContains(t, v.Detail, "not IDEMPOTENCY_CONFLICT")
	}
}

// boundEvidence: a second operation_id (op-00000002) whose first call, with
// a reason other than the holder's, was deduplicated onto op-00000001 by
// the business key. Its record reads the holder through the binding (the
// table answers a bound key's handle with the holder), as gather does.
func boundEvidence() (Evidence, Call) {
	ev := cleanEvidence()
	holder := *ev.Ops[0].Final
	own := handleOf("support-assistant", "M1", "alice", toolRisk, "op-00000002")
	ev.Ops = append(ev.Ops, OpRecord{Cell: 0, Handle: own, Persona: "ALICE", Tenant: "M1", ClientID: "support-assistant",
		Tool: toolRisk, OperationID: "op-00000002", EffectKey: "risk|O20260728001", Final: &holder})
	ev.RiskByHandle["0/"+own] = []string{"rv-1"} // the holder's effect, as gather reads it
	dedup := Call{Seq: 2, Persona: "ALICE", Tool: toolRisk, OperationID: "op-00000002",
		Args:  map[string]any{"order_id": "O20260728001", "reason": "manual check", "operation_id": "op-00000002"},
		Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second), Status: "SUCCEEDED",
		Handle: holder.Handle, ResourceID: "rv-1", Deduplicated: true}
	ev.History.Calls = append(ev.History.Calls, dedup)
	return ev, dedup
}

// Seed 20261201 (cell 0, chaos-20261201-0-44): a key deduplicated onto a
// holder with another reason, then replayed with its own first arguments,
// was flagged because the checker compared it with the holder's payload.
func TestCheckerAcceptsABoundKeyReplayedWithItsOwnFirstArguments(t *testing.T) {
	ev, dedup := boundEvidence()
	again := dedup
	again.Seq, again.Start, again.End = 3, t0.Add(4*time.Second), t0.Add(5*time.Second)
	ev.History.Calls = append(ev.History.Calls, again)
	require.Empty(t, Check(ev))
}

func TestCheckerFlagsABoundKeyReusedWithOtherArgumentsThatWasNotAConflict(t *testing.T) {
	ev, dedup := boundEvidence()
	changed := dedup
	changed.Seq, changed.Start, changed.End = 3, t0.Add(4*time.Second), t0.Add(5*time.Second)
	// The holder's own arguments: still other arguments than this key's first.
	changed.Args = map[string]any{"order_id": "O20260728001", "reason": "velocity", "operation_id": "op-00000002"}
	ev.History.Calls = append(ev.History.Calls, changed)
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer)

	changed.Code, changed.Status, changed.Handle, changed.ResourceID, changed.Deduplicated = "IDEMPOTENCY_CONFLICT", "", "", "", false
	ev.History.Calls[2] = changed
	require.Empty(t, Check(ev))
}

// ticketIncidentEvidence is a deployment ticket whose first create the
// provider committed past its commit deadline (a broken promise) after the
// reconciler had proven absence and re-sent: two tickets on one target, and
// the duplicate audit's incident naming the ids it found.
func ticketIncidentEvidence(named string, duplicates int) Evidence {
	handle := handleOf("deploy-bot", "T1", "dana", toolTicket, "op-00000002")
	target := map[string]string{"service": "payments-api", "commit": "abc0001", "environment": "staging"}
	op := operation.Operation{
		Handle: handle, State: operation.StateEscalated, Outcome: operation.OutcomeIncidentMultipleEffects, Version: 6,
		TenantID: "T1", ResourceID: "ticket-2", DuplicateResources: duplicates, Target: target, Payload: target,
		Key: operation.RequestKey{ClientID: "deploy-bot", Tool: toolTicket, OperationID: "op-00000002"},
		Journal: []operation.Event{
			{Type: operation.EventIntentRecorded, At: t0, To: operation.StatePending},
			{Type: operation.EventDispatchStarted, At: t0, From: operation.StatePending, To: operation.StatePending},
			{Type: operation.EventResponseMissing, At: t0.Add(time.Second), From: operation.StatePending, To: operation.StateUnknown},
			{Type: operation.EventProbeNotFound, At: t0.Add(20 * time.Second), From: operation.StateUnknown, To: operation.StateRetryable},
			{Type: operation.EventRetryClaimed, At: t0.Add(21 * time.Second), From: operation.StateRetryable, To: operation.StatePending},
			{Type: operation.EventCreateSucceeded, At: t0.Add(22 * time.Second), From: operation.StatePending, To: operation.StateSucceeded, ResourceID: "ticket-2"},
			{Type: operation.EventAuditMultiple, At: t0.Add(60 * time.Second), From: operation.StateSucceeded, To: operation.StateEscalated,
				Duplicates: duplicates, Detail: "incident: duplicate audit found 2 matching effects [" + named + "]; escalated to ops; nothing deleted or chosen"},
		},
	}
	return Evidence{
		Seed: 8,
		Ops: []OpRecord{{Cell: 0, Handle: handle, Persona: "DEPLOYER", Tenant: "T1", ClientID: "deploy-bot", Tool: toolTicket,
			OperationID: "op-00000002", EffectKey: "ticket|payments-api/abc0001/staging", Final: &op, BusinessKeyHolder: handle}},
		EffectsByKey: map[string][]string{"0/ticket|payments-api/abc0001/staging": {"ticket-1", "ticket-2"}},
		// The late commit past the deadline: the provider's broken promise.
		ExcusedByKey: map[string]int{"0/ticket|payments-api/abc0001/staging": 1},
		MaxQueueWait: 200 * time.Millisecond, OverloadSlack: time.Second,
	}
}

func TestCheckerAcceptsALateCommitBeyondThePromiseNamedByTheAuditsIncident(t *testing.T) {
	ev := ticketIncidentEvidence("ticket-1, ticket-2", 2)
	require.Empty(t, journalProblem(*ev.Ops[0].Final), "the hand-made journal must itself be legal")
	require.NotContains(t, invariantsOf(Check(ev)), InvOneEffect)
}

// An incident names every ticket, but only tickets the provider made by
// breaking its promises are excused: a second ticket it did not cause
// (say, a re-send after a lookup that failed was taken for absence) is the
// server's, incident or not.
func TestCheckerFlagsASecondTicketNoBrokenPromiseExplainsEvenUnderAnIncident(t *testing.T) {
	ev := ticketIncidentEvidence("ticket-1, ticket-2", 2)
	ev.ExcusedByKey = map[string]int{}
	vs := Check(ev)
	require.Contains(t, invariantsOf(vs), InvOneEffect)
	require.Contains(t, vs[0].Detail, "broke its promise only 0 time(s)")
}

func TestCheckerFlagsAnIncidentThatDoesNotNameEveryTicket(t *testing.T) {
	// The count agrees, the ids do not: the provider's ticket-1 (the late
	// commit) is not what the incident names.
	ev := ticketIncidentEvidence("ticket-2, ticket-7", 2)
	vs := Check(ev)
	require.Contains(t, invariantsOf(vs), InvOneEffect)
	require.Contains(t, vs[0].Detail, "ticket-1")
}

func TestCheckerFlagsALateCommitBeyondThePromiseLeftSucceeded(t *testing.T) {
	// The broken promise is no excuse: a second ticket with the operation
	// still SUCCEEDED (the audit missed it) breaks invariant 1.
	ev := ticketIncidentEvidence("", 0)
	op := *ev.Ops[0].Final
	op.Journal = op.Journal[:6]
	op.State, op.Outcome, op.Version, op.DuplicateResources = operation.StateSucceeded, operation.OutcomeCommittedAndVerified, 5, 0
	ev.Ops[0].Final = &op
	require.Empty(t, journalProblem(op))
	require.Contains(t, invariantsOf(Check(ev)), InvOneEffect)
}

// The backpressure cap counts every process with its own admission gate:
// the stream's reconciler is one, beside the sweep's (seed 20261201 at
// 1,000 operations saw 9 risk calls in flight against a cap of 8 that
// left it out).
func TestTheInFlightCapCountsEveryProcessWithAGate(t *testing.T) {
	c := &cell{replicas: []*replica{{}, {restarts: 1}, {}}}
	require.Equal(t, 3+1+1, c.downstreamProcesses(), "replicas, a restart, the sweep's reconciler")
	c.streamRecon = &process{}
	require.Equal(t, 3+1+1+1, c.downstreamProcesses(), "and the stream's reconciler")
}

// An IDEMPOTENCY_CONFLICT is only right when the caller's own key space
// (client, tenant, tool, operation_id) held other arguments: a call with
// them started before the conflict was answered. Otherwise the server
// refused a fresh or replayed key (a denial of service), and when the id
// was another tenant's, it told this tenant that the other used it.

func conflictCall(seq int, persona, opID string, args map[string]any, start, end time.Time) Call {
	return Call{Seq: seq, Persona: persona, Tool: toolRisk, OperationID: opID, Args: withID(args, opID),
		Start: start, End: end, Code: "IDEMPOTENCY_CONFLICT", IsError: true}
}

func TestCheckerFlagsAConflictForAKeyThatOnlyEverHadTheseArguments(t *testing.T) {
	ev := cleanEvidence()
	ev.History.Calls = append(ev.History.Calls, conflictCall(2, "ALICE", "op-00000001",
		map[string]any{"order_id": "O20260728001", "reason": "velocity"}, t0.Add(2*time.Second), t0.Add(3*time.Second)))
	vs := Check(ev)
	require.Contains(t, invariantsOf(vs), InvFirstAnswer)
	require.NotContains(t, invariantsOf(vs), InvTenantIsolated, "no other tenant used the id")
}

// Seed 20261201 with the tenant dropped from the request key's scope:
// BOB reusing ALICE's operation_id with his own arguments was answered
// IDEMPOTENCY_CONFLICT, and the checker passed it.
func TestCheckerFlagsAConflictAnsweredToATenantReusingAnotherTenantsID(t *testing.T) {
	ev := cleanEvidence()
	ev.History.Calls = append(ev.History.Calls, conflictCall(2, "BOB", "op-00000001",
		map[string]any{"order_id": "O20260728051", "reason": "manual check"}, t0.Add(2*time.Second), t0.Add(3*time.Second)))
	vs := Check(ev)
	require.Contains(t, invariantsOf(vs), InvFirstAnswer)
	require.Contains(t, invariantsOf(vs), InvTenantIsolated, "the conflict tells BOB that ALICE used the id")
}

func TestCheckerAcceptsATenantReusingAnotherTenantsIDAsANewOperation(t *testing.T) {
	ev := cleanEvidence()
	handle := handleOf("support-assistant", "M2", "bob", toolRisk, "op-00000001")
	op := succeededOp(handle, "rv-2")
	op.TenantID, op.Payload = "M2", map[string]string{"order_id": "O20260728051", "reason": "manual check"}
	ev.Ops = append(ev.Ops, OpRecord{Cell: 0, Handle: handle, Persona: "BOB", Tenant: "M2", ClientID: "support-assistant",
		Tool: toolRisk, OperationID: "op-00000001", EffectKey: "risk|O20260728051", Final: &op, BusinessKeyHolder: handle})
	ev.EffectsByKey["0/risk|O20260728051"] = []string{"rv-2"}
	ev.RiskByHandle["0/"+handle] = []string{"rv-2"}
	ev.History.Calls = append(ev.History.Calls, Call{Seq: 2, Persona: "BOB", Tool: toolRisk, OperationID: "op-00000001",
		Args:  map[string]any{"order_id": "O20260728051", "reason": "manual check", "operation_id": "op-00000001"},
		Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second), Status: "SUCCEEDED", Handle: handle, ResourceID: "rv-2"})
	require.Empty(t, Check(ev))
}

// A bound key is judged by its own first arguments, not the holder's
// payload: replaying them is a bound replay, never a conflict.
func TestCheckerFlagsAConflictForABoundKeyReplayedWithItsOwnFirstArguments(t *testing.T) {
	ev, dedup := boundEvidence()
	again := conflictCall(3, "ALICE", "op-00000002", map[string]any{"order_id": "O20260728001", "reason": "manual check"},
		t0.Add(4*time.Second), t0.Add(5*time.Second))
	require.True(t, sameCallArgs(again.Args, dedup.Args))
	ev.History.Calls = append(ev.History.Calls, again)
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer)
}

// The insert of a call without an answer may have applied: other
// arguments after it are a conflict.
func TestCheckerAcceptsAConflictAfterAnUnansweredCallWithOtherArguments(t *testing.T) {
	ev := cleanEvidence()
	lost := ev.History.Calls[0]
	lost.Seq, lost.Start, lost.End = 0, t0.Add(-2*time.Second), t0.Add(-time.Second)
	lost.Args = map[string]any{"order_id": "O20260728001", "reason": "other", "operation_id": "op-00000001"}
	lost.Status, lost.Handle, lost.ResourceID, lost.TransportError = "", "", "", "connection reset"
	ev.History.Calls[0].Code, ev.History.Calls[0].Status, ev.History.Calls[0].Handle, ev.History.Calls[0].ResourceID = "IDEMPOTENCY_CONFLICT", "", "", ""
	ev.History.Calls = []Call{lost, ev.History.Calls[0]}
	for _, v := range Check(ev) {
		require.NotEqual(t, InvFirstAnswer, v.Invariant, v.String())
	}
}

// Two first calls with other arguments race: one inserts, the other is a
// conflict, even when the loser's answer comes back first.
func TestCheckerAcceptsAConflictForTheLoserOfConcurrentFirstCalls(t *testing.T) {
	ev := cleanEvidence() // the winner, #1, runs from t0 to t0+1s
	ev.History.Calls = append(ev.History.Calls, conflictCall(2, "ALICE", "op-00000001",
		map[string]any{"order_id": "O20260728001", "reason": "other"}, t0.Add(-100*time.Millisecond), t0.Add(200*time.Millisecond)))
	require.Empty(t, Check(ev))
}

func TestCheckerFlagsAConflictExplainedOnlyByALaterCall(t *testing.T) {
	ev := cleanEvidence() // #1 starts at t0
	ev.History.Calls = append(ev.History.Calls, conflictCall(2, "ALICE", "op-00000001",
		map[string]any{"order_id": "O20260728001", "reason": "other"}, t0.Add(-time.Second), t0.Add(-500*time.Millisecond)))
	require.Contains(t, invariantsOf(Check(ev)), InvFirstAnswer)
}

// A conflict stores nothing, so it cannot be what the key held: BOB's
// second use of ALICE's id, with other arguments again, is no conflict
// either (seed 20261201 with the tenant dropped from the scope).
func TestCheckerFlagsAConflictExplainedOnlyByAnEarlierConflict(t *testing.T) {
	ev := cleanEvidence()
	ev.History.Calls = append(ev.History.Calls,
		conflictCall(2, "BOB", "op-00000001", map[string]any{"order_id": "O20260728051", "reason": "manual check"}, t0.Add(2*time.Second), t0.Add(3*time.Second)),
		conflictCall(3, "BOB", "op-00000001", map[string]any{"order_id": "O20260728052", "reason": "velocity"}, t0.Add(4*time.Second), t0.Add(5*time.Second)))
	var flagged []int
	for _, v := range Check(ev) {
		if v.Invariant == InvFirstAnswer {
			flagged = append(flagged, v.Invariant)
		}
	}
	require.Len(t, flagged, 2, "both conflicts")
}

// burstEvidence is a clean history plus one burst of 24 writes of ALICE's
// intent at replica 1: the first admitted calls had their inserts held
// from 10 ms until the release at 300 ms and were answered deduplicated
// after it; the rest were refused OVERLOADED at 210 ms.
func burstEvidence(admitted int) Evidence {
	ev := cleanEvidence()
	ev.GateMaxInFlight, ev.GateMaxQueue = 4, 4
	holder := ev.Ops[0].Handle
	b := Burst{Cell: 0, Plan: 0, Replica: 1, OperationID: "op-00000001", Size: 24,
		Released: t0.Add(300 * time.Millisecond), Complete: true}
	for k := range b.Size {
		id := fmt.Sprintf("op-00000001-burst-%d", k)
		c := Call{Seq: 10 + k, Persona: "ALICE", Replica: 1, Tool: toolRisk, OperationID: id,
			Args:  map[string]any{"order_id": "O20260728001", "reason": "velocity", "operation_id": id},
			Start: t0.Add(time.Duration(k) * time.Millisecond)}
		if k < admitted {
			c.End, c.Status, c.Handle, c.ResourceID, c.Deduplicated = t0.Add(400*time.Millisecond), "SUCCEEDED", holder, "rv-1", true
			b.Holds = append(b.Holds, Hold{Process: "replica-1.0", Handle: handleOf("support-assistant", "M1", "alice", toolRisk, id),
				From: t0.Add(10 * time.Millisecond), To: b.Released})
		} else {
			c.End, c.Code, c.IsError, c.RetryAllowed = t0.Add(210*time.Millisecond), "OVERLOADED", true, true
		}
		ev.History.Calls = append(ev.History.Calls, c)
		b.Calls = append(b.Calls, c.Seq)
	}
	ev.History.Bursts = []Burst{b}
	return ev
}

func TestCheckerAcceptsABurstRefusedBeyondTheGatesSlots(t *testing.T) {
	require.Empty(t, Check(burstEvidence(4)))
}

func TestCheckerFlagsABurstTheGateAdmittedWhole(t *testing.T) {
	vs := Check(burstEvidence(24))
	require.Len(t, vs, 2)
	require.Equal(t, []int{InvBackpressure, InvBackpressure}, invariantsOf(vs))
	require.Contains(t, vs[0].Detail, "24 of its inserts were held at once in replica-1.0, whose gate has 4 slots")
	require.Contains(t, vs[1].Detail, "0 OVERLOADED answers, at least 16 required")
	require.Equal(t, "op-00000001", vs[1].OperationID, "the printout finds the burst's calls by the plan's operation_id")
}

func TestCheckerFlagsMoreHeldInsertsThanSlotsEvenWhenTheHoldWasNotComplete(t *testing.T) {
	ev := burstEvidence(5)
	ev.History.Bursts[0].Complete = false
	vs := Check(ev)
	require.Len(t, vs, 1)
	require.Contains(t, vs[0].Detail, "5 of its inserts were held at once")
}

func TestCheckerCountsHoldsThatFollowEachOtherAsOneSlot(t *testing.T) {
	ev := burstEvidence(4)
	b := &ev.History.Bursts[0]
	// A fifth insert held only after one of the four was let go (its
	// caller gave up): the gate may have handed it that slot.
	b.Holds[0].To = t0.Add(100 * time.Millisecond)
	b.Holds = append(b.Holds, Hold{Process: "replica-1.0", Handle: "h5", From: t0.Add(100 * time.Millisecond), To: b.Released})
	require.Empty(t, Check(ev))
}

func TestCheckerDoesNotJudgeTheRefusalsOfADisturbedOrIncompleteBurst(t *testing.T) {
	for name, disturb := range map[string]func(*Evidence){
		"the replica restarted during the burst: a fresh gate": func(ev *Evidence) {
			ev.History.Faults = append(ev.History.Faults,
				Fault{Cell: 0, Kind: FaultReplicaStopped, Detail: "replica 1", At: t0.Add(50 * time.Millisecond)},
				Fault{Cell: 0, Kind: FaultReplicaRestarted, Detail: "replica 1", At: t0.Add(60 * time.Millisecond)})
		},
		"a call without an answer": func(ev *Evidence) {
			ev.History.Calls[len(ev.History.Calls)-1].TransportError = "connection reset"
		},
		"the hold was lifted before every call was answered or held": func(ev *Evidence) {
			ev.History.Bursts[0].Complete = false
		},
	} {
		t.Run(name, func(t *testing.T) {
			// Twelve admitted, four of them held: judged, too few refusals.
			ev := burstEvidence(12)
			ev.History.Bursts[0].Holds = ev.History.Bursts[0].Holds[:4]
			require.Contains(t, invariantsOf(Check(ev)), InvBackpressure)
			disturb(&ev)
			require.Empty(t, Check(ev))
		})
	}
}

func TestCheckerCountsBurstCallsRefusedBeforeTheirInsertAsSlack(t *testing.T) {
	ev := burstEvidence(4)
	// Ten calls refused by a failed ownership lookup instead of the gate:
	// admitted, they may have freed their slots early; 10 OVERLOADED
	// answers still suffice (24 - 4 - 4 - 10 = 6).
	for i := 4; i < 14; i++ {
		ev.History.Calls[1+i].Code = "TEMPORARY_UNAVAILABLE"
	}
	require.Empty(t, Check(ev))
}

func TestCheckerDoesNotTakeAnErrorAnswerNamingAHandleForARefusal(t *testing.T) {
	// Deduplicated onto a holder whose outcome is unknown: an error code,
	// but the call passed its insert, so it was admitted.
	ev := burstEvidence(24)
	for i := range ev.History.Calls[1:] {
		c := &ev.History.Calls[1+i]
		c.Code, c.IsError, c.Status = "OPERATION_UNKNOWN", true, "UNKNOWN"
	}
	vs := Check(ev)
	require.Len(t, vs, 2)
	require.Contains(t, vs[1].Detail, "0 OVERLOADED answers, at least 16 required")
}

// Invariant 1 reads the table's business keys too: a live operation whose
// fact is free could see the fact created again, and a FAILED one still
// holding it would refuse every later request for the fact.
func TestCheckerFlagsABusinessKeyHeldByAFailedOperationOrFreedUnderALiveOne(t *testing.T) {
	freed := cleanEvidence()
	freed.Ops[0].BusinessKeyHolder = ""
	vs := Check(freed)
	require.Len(t, vs, 1)
	require.Equal(t, InvOneEffect, vs[0].Invariant)
	require.Contains(t, vs[0].Detail, "could be created again")

	kept := cleanEvidence()
	failed := *kept.Ops[0].Final
	failed.State, failed.Outcome, failed.ResourceID = operation.StateFailed, operation.OutcomeFailedWithoutEffect, ""
	failed.Journal = append(failed.Journal[:2:2], operation.Event{Type: operation.EventBusinessRejected, At: t0.Add(time.Second),
		From: operation.StatePending, To: operation.StateFailed})
	kept.Ops[0].Final = &failed
	kept.EffectsByKey = map[string][]string{}
	kept.RiskByHandle = map[string][]string{}
	found := false
	for _, v := range Check(kept) {
		if v.Invariant == InvOneEffect && strings.Contains(v.Detail, "FAILED but still holds") {
			found = true
		}
	}
	require.True(t, found, "a FAILED operation still holding its business key is flagged")
}

// A business key with two tickets is reported with how the provider came
// to make each and every other operation stored on the key, so the second
// ticket can be told apart (a broken promise, or the server's second
// create) from the report alone.
func TestAViolationOfOneEffectPrintsEveryTicketsOriginAndEveryOperationOnTheKey(t *testing.T) {
	ev := ticketIncidentEvidence("", 0)
	op := *ev.Ops[0].Final
	op.Journal = op.Journal[:6]
	op.Journal[1].CommitDeadline = t0.Add(25 * time.Second)
	op.State, op.Outcome, op.Version, op.DuplicateResources = operation.StateSucceeded, operation.OutcomeCommittedAndVerified, 5, 0
	ev.Ops[0].Final = &op
	other := op
	other.Handle, other.State, other.ResourceID = "op_other", operation.StateFailed, ""
	other.Journal = []operation.Event{{Type: operation.EventIntentRecorded, At: t0.Add(-time.Minute), To: operation.StatePending}}
	ev.Ops = append(ev.Ops, OpRecord{Cell: 0, Handle: "op_other", Persona: "DEPLOYER", Tool: toolTicket, OperationID: "op-00000009",
		EffectKey: ev.Ops[0].EffectKey, Final: &other, BusinessKeyHolder: ev.Ops[0].Handle})
	ev.TicketOrigins = map[string]string{"0/ticket-1": "commit_late_beyond_deadline, arrived 12:00:00.000, promise broken", "0/ticket-2": "no fault"}

	vs := Check(ev)
	require.Contains(t, invariantsOf(vs), InvOneEffect)
	var out bytes.Buffer
	PrintViolation(&out, ev, vs[0])
	require.Contains(t, out.String(), "ticket-1: commit_late_beyond_deadline, arrived 12:00:00.000, promise broken")
	require.Contains(t, out.String(), "ticket-2: no fault")
	require.Contains(t, out.String(), "also on this business key: op_other by DEPLOYER operation_id op-00000009")
	require.Contains(t, out.String(), "commit_deadline=12:00:25.000")
}

// withdrawalEvidence is a ticket withdrawn after its probe proved it
// absent, the next request's ticket-2 under a new operation_id, and the
// withdrawn create's late ticket-1 (a broken promise); reported says
// whether the withdrawal's audit journalled ticket-1 on the withdrawn
// operation.
func withdrawalEvidence(reported bool, auditDue bool) Evidence {
	target := map[string]string{"service": "payments-api", "commit": "abc0001", "environment": "staging"}
	withdrawnHandle := handleOf("deploy-bot", "T1", "dana", toolTicket, "op-00000003")
	nextHandle := handleOf("deploy-bot", "T1", "dana", toolTicket, "op-00000003-after-withdrawal")
	withdrawn := operation.Operation{
		Handle: withdrawnHandle, State: operation.StateFailed, Outcome: operation.OutcomeFailedWithoutEffect, Version: 4,
		TenantID: "T1", Target: target, Payload: target,
		Key: operation.RequestKey{ClientID: "deploy-bot", Tool: toolTicket, OperationID: "op-00000003"},
		Journal: []operation.Event{
			{Type: operation.EventIntentRecorded, At: t0, To: operation.StatePending},
			{Type: operation.EventDispatchStarted, At: t0, From: operation.StatePending, To: operation.StatePending},
			{Type: operation.EventClientTimeout, At: t0.Add(time.Second), From: operation.StatePending, To: operation.StateUnknown},
			{Type: operation.EventProbeNotFound, At: t0.Add(20 * time.Second), From: operation.StateUnknown, To: operation.StateRetryable, LateCommitsBounded: true},
			{Type: operation.EventClientCancelled, At: t0.Add(21 * time.Second), From: operation.StateRetryable, To: operation.StateFailed},
		},
	}
	if auditDue {
		withdrawn.DueAt = t0.Add(time.Minute)
	}
	if reported {
		withdrawn.Version++
		withdrawn.Journal = append(withdrawn.Journal, operation.Event{Type: operation.EventEvidenceRecorded, At: t0.Add(time.Minute),
			From: operation.StateFailed, To: operation.StateFailed, ResourceID: "ticket-1", Result: "match_not_held"})
	}
	next := operation.Operation{
		Handle: nextHandle, State: operation.StateSucceeded, Outcome: operation.OutcomeCommittedAndVerified, Version: 2,
		TenantID: "T1", ResourceID: "ticket-2", Target: target, Payload: target,
		Key: operation.RequestKey{ClientID: "deploy-bot", Tool: toolTicket, OperationID: "op-00000003-after-withdrawal"},
		Journal: []operation.Event{
			{Type: operation.EventIntentRecorded, At: t0.Add(22 * time.Second), To: operation.StatePending},
			{Type: operation.EventDispatchStarted, At: t0.Add(22 * time.Second), From: operation.StatePending, To: operation.StatePending},
			{Type: operation.EventCreateSucceeded, At: t0.Add(23 * time.Second), From: operation.StatePending, To: operation.StateSucceeded, ResourceID: "ticket-2"},
		},
	}
	key := "ticket|payments-api/abc0001/staging"
	return Evidence{
		Seed: 9,
		Ops: []OpRecord{
			{Cell: 0, Handle: withdrawnHandle, Persona: "DEPLOYER", Tenant: "T1", ClientID: "deploy-bot", Tool: toolTicket,
				OperationID: "op-00000003", EffectKey: key, Final: &withdrawn, BusinessKeyHolder: nextHandle},
			{Cell: 0, Handle: nextHandle, Persona: "DEPLOYER", Tenant: "T1", ClientID: "deploy-bot", Tool: toolTicket,
				OperationID: "op-00000003-after-withdrawal", EffectKey: key, Final: &next, BusinessKeyHolder: nextHandle},
		},
		EffectsByKey: map[string][]string{"0/" + key: {"ticket-1", "ticket-2"}},
		ExcusedByKey: map[string]int{"0/" + key: 1},
		MaxQueueWait: 200 * time.Millisecond, OverloadSlack: time.Second,
	}
}

// A late ticket of a withdrawn operation, reported on it by the
// withdrawal's audit, is the incident of the second ticket: the holder's
// is the fact's one.
func TestCheckerAcceptsAWithdrawnOperationsLateTicketReportedAfterItFailed(t *testing.T) {
	ev := withdrawalEvidence(true, false)
	for _, r := range ev.Ops {
		require.Empty(t, journalProblem(*r.Final), "the hand-made journals must themselves be legal")
	}
	require.Empty(t, Check(ev))
}

// Unreported, the same two tickets are a violation of one effect: the
// hole the withdrawal's audit closes.
func TestCheckerFlagsAWithdrawnOperationsLateTicketNobodyReported(t *testing.T) {
	vs := Check(withdrawalEvidence(false, false))
	require.Contains(t, invariantsOf(vs), InvOneEffect)
}

// A withdrawal whose audit is still due after the quiet phase has not been
// checked: the campaign says so rather than judge it.
func TestCheckerFlagsAWithdrawalWhoseAuditIsStillDue(t *testing.T) {
	vs := Check(withdrawalEvidence(true, true))
	require.Contains(t, invariantsOf(vs), InvSettled)
}

// auditedIncident is the clean history's operation re-sent by the
// reconciler, SUCCEEDED on the re-send's answer with its duplicate audit
// due, then turned into an incident by that audit: the provider committed
// the first create too, past its promise.
func auditedIncident(t *testing.T) Evidence {
	t.Helper()
	ev := cleanEvidence()
	ev.EffectsByKey["0/risk|O20260728001"] = []string{"rv-1", "rv-2"}
	op := *ev.Ops[0].Final
	op.Journal = []operation.Event{
		{Type: operation.EventIntentRecorded, At: t0, To: operation.StatePending},
		{Type: operation.EventDispatchStarted, At: t0, From: operation.StatePending, To: operation.StatePending},
		{Type: operation.EventClientTimeout, At: t0, From: operation.StatePending, To: operation.StateUnknown},
		{Type: operation.EventProbeNotFound, At: t0.Add(time.Second), From: operation.StateUnknown, To: operation.StateRetryable},
		{Type: operation.EventRetryClaimed, At: t0.Add(2 * time.Second), From: operation.StateRetryable, To: operation.StatePending},
		{Type: operation.EventCreateSucceeded, At: t0.Add(2 * time.Second), From: operation.StatePending, To: operation.StateSucceeded,
			ResourceID: "rv-1", NextAt: t0.Add(time.Minute)},
		{Type: operation.EventAuditMultiple, At: t0.Add(time.Minute), From: operation.StateSucceeded, To: operation.StateEscalated, Duplicates: 2},
	}
	op.State, op.Outcome, op.DuplicateResources, op.RetryCount = operation.StateEscalated, operation.OutcomeIncidentMultipleEffects, 2, 1
	op.Version = int64(len(op.Journal) - 1)
	ev.Ops[0].Final = &op
	// The caller's replay, read while the audit was due, heard SUCCEEDED;
	// the next one, after it, hears the incident.
	ev.History.Calls[0].Start, ev.History.Calls[0].End = t0.Add(3*time.Second), t0.Add(4*time.Second)
	later := ev.History.Calls[0]
	later.Seq, later.Start, later.End, later.Status, later.Code = 2, t0.Add(2*time.Minute), t0.Add(2*time.Minute+time.Second),
		string(operation.StateEscalated), "OPERATION_ESCALATED"
	ev.History.Calls = append(ev.History.Calls, later)
	return ev
}

// SUCCEEDED is final except for its duplicate audit (docs/design.md): an
// answer given while the audit was due, which said so, may be followed by
// the incident that audit raises over the reconciler's own re-send.
func TestCheckerAcceptsASucceededAnswerItsDuplicateAuditTurnedIntoAnIncident(t *testing.T) {
	require.Empty(t, Check(auditedIncident(t)))
}
