package release_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// walk applies events to a fresh UNKNOWN-capable operation in memory.
func walk(t *testing.T, events ...operation.Event) operation.Operation {
	t.Helper()
	op := unknownOp(t, paymentsTarget(), t0, t0.Add(time.Second))
	for i, ev := range events {
		ev.At = t0.Add(time.Duration(i+2) * time.Second)
		var err error
		op, err = op.Apply(ev)
		require.NoError(t, err)
	}
	return op
}

// approver is a family that only approves: Approve reads no provider.
var approver = release.New(nil, grants, release.DefaultRecovery())

func TestApproveIsRefusedUntilTheTicketIsProven(t *testing.T) {
	pending := unknownOp(t, paymentsTarget(), t0, t0)
	pending.State, pending.Outcome = operation.StatePending, operation.OutcomePending
	foreignTool := walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "rv-1", Receipt: "receipt-1"})
	foreignTool.Key.Tool = "request_risk_review"

	for _, tc := range []struct {
		name string
		op   operation.Operation
		want string
	}{
		{"unknown", walk(t), "ticket creation is unknown; reconciliation must prove it first"},
		{"inconclusive probe", walk(t, operation.Event{Type: operation.EventProbeInconclusive}), "ticket creation is unknown; reconciliation must prove it first"},
		{"incident", walk(t, operation.Event{Type: operation.EventProbeMultiple, Duplicates: 2}), "multiple tickets exist: incident raised; operator must resolve"},
		{"probe budget", walk(t, operation.Event{Type: operation.EventProbeBudgetExhausted}), "escalated to an operator"},
		{"proven absent", walk(t, operation.Event{Type: operation.EventProbeNotFound, LateCommitsBounded: true}), "awaits the reconciler's retry"},
		{"not found, late commits unbounded", walk(t, operation.Event{Type: operation.EventProbeNotFound}), "the reconciler's retry settles it"},
		{"operator failed", walk(t, operation.Event{Type: operation.EventProbeMultiple}, operation.Event{Type: operation.EventOperatorFailed}), "failed without effect"},
		{"pending", pending, "still in flight"},
		// A reported ticket is no proven absence, and no failure without effect.
		{"retryable with a reported ticket", walk(t, operation.Event{Type: operation.EventProbeNotFound},
			operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "ticket-9473"}), "ticket-9473"},
		{"failed with a ticket reported afterwards", walk(t, operation.Event{Type: operation.EventProbeMultiple}, operation.Event{Type: operation.EventOperatorFailed},
			operation.Event{Type: operation.EventEvidenceRecorded, ResourceID: "ticket-9474"}), "ticket-9474"},
		{"another family", foreignTool, "is not a deployment ticket"},
		// A ticket found by search may be another request's while this
		// one's create may still commit: its duplicate audit is pending.
		{"ticket found by search, its audit pending", walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9475",
			Receipt: "receipt-9475", NextAt: t0.Add(time.Minute)}), "the ticket was found by a search, not named by the create's own answer; the duplicate audit has not yet shown it is the only ticket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := approver.Approve(alice, tc.op)
			fail := requireFailure(t, err, tools.CodePreconditionFailed)
			assert.Contains(t, fail.Message, tc.want)
			assert.False(t, fail.RetryAllowed)
			require.NotNil(t, fail.Next)
			assert.Equal(t, packet.ToolGetOperation, fail.Next.Tool)
			assert.Equal(t, map[string]string{"handle": tc.op.Handle}, fail.Next.Arguments)
		})
	}

	ok, err := approver.Approve(alice, walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9472", Receipt: "receipt-61b8"}))
	require.NoError(t, err)
	opID := "deploy-ticket-probe-1"
	assert.Equal(t, release.Approval{TicketHandle: ok.TicketHandle, OperationID: &opID, TicketID: "ticket-9472", EffectReceipt: "receipt-61b8", Decision: "approved"}, ok)
}

// escalated drives a real operation to ESCALATED the way the reconciler
// will: duplicate_then_drop, then a probe that finds two tickets.
func escalated(t *testing.T, f fixture) operation.Operation {
	t.Helper()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	require.Equal(t, operation.StateUnknown, sub.Operation.State)

	f.clock.Advance(f.family.Recovery().SettleWindow)
	res, err := f.family.Probe(context.Background(), sub.Operation)
	require.NoError(t, err)
	require.Len(t, res.Matches, 2)
	op, err := f.ex.Transition(context.Background(), release.ToolCreate, sub.Operation, operation.Event{
		Type: operation.EventProbeMultiple, At: f.clock.Now(), Source: res.Source, Result: "multiple_matches",
		Duplicates: len(res.Matches), Detail: res.Detail,
	}, nil)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, op.State)
	return op
}

func TestResolveByOperatorSettlesAnIncidentAndUnblocksApproval(t *testing.T) {
	f := newFixture(t, 0)
	op := escalated(t, f)
	_, err := f.family.Approve(alice, op)
	requireFailure(t, err, tools.CodePreconditionFailed)

	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, alice, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "kept ticket-9001", ResourceID: "ticket-9001"})
	requireFailure(t, err, tools.CodeForbidden)
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "checked release queue"})
	requireFailure(t, err, tools.CodeInvalidArgument)
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: "MAYBE", Evidence: "checked", ResourceID: "ticket-9001"})
	requireFailure(t, err, tools.CodeInvalidArgument)
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: strings.Repeat("x", 1001), ResourceID: "ticket-9001"})
	requireFailure(t, err, tools.CodeInvalidArgument)
	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, stored.State, "refused resolutions change nothing")

	evidence := "Two tickets in the release queue; kept ticket-9001, cancelled ticket-9002 (INC-123)."
	// What the evidence says is checked: the search must show ticket-9001
	// as the only one, so the operator removes ticket-9002 first.
	require.True(t, f.sim.RemoveTicket("ticket-9002"))
	f.clock.Advance(untilCommitHorizon(t, f, op))
	settled, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: evidence, ResourceID: "ticket-9001"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, settled.State)
	assert.Equal(t, operation.OutcomeCommittedAndVerified, settled.Outcome)
	assert.Equal(t, "ticket-9001", settled.ResourceID)
	assert.Equal(t, tools.Receipt(op.Handle, "ticket-9001"), settled.Receipt)
	last := settled.Journal[len(settled.Journal)-1]
	assert.Equal(t, operation.EventOperatorSucceeded, last.Type)
	assert.Equal(t, "op-olga", last.Actor)
	assert.Equal(t, operatortools.SourceOperator, last.Source)
	assert.Equal(t, evidence, last.Detail)

	stored, err = f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, settled.Version, stored.Version)
	approval, err := f.family.Approve(alice, stored)
	require.NoError(t, err)
	assert.Equal(t, "ticket-9001", approval.TicketID)

	// The stale copy cannot be resolved again; the settled one is not ESCALATED.
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "second opinion: keep 9001", ResourceID: "ticket-9001"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "changed while it was being resolved")
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, stored, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "second opinion", EffectsRemoved: true})
	requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
}

func TestResolveFailedReleasesTheBusinessKeyOnlyOnceEffectsAreRemoved(t *testing.T) {
	f := newFixture(t, 0)
	op := escalated(t, f)
	_, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "both tickets look wrong"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "effects_removed")
	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, stored.State, "a refused FAILED keeps the business key held")
	dedup, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-while-incident"))
	require.NoError(t, err)
	assert.True(t, dedup.Deduplicated, "the incident still holds the target: no third ticket")

	evidence := "both tickets cancelled by release team"
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: evidence, EffectsRemoved: true})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "still shows effects", "the statement alone is not enough: the search still finds the tickets")
	require.True(t, f.sim.RemoveTicket("ticket-9001"))
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: evidence, EffectsRemoved: true})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "ticket-9002", "one ticket left is still an effect")
	require.True(t, f.sim.RemoveTicket("ticket-9002"))
	// Absence releases the fact only once the search covers the commit
	// horizon and the grace past it.
	f.clock.Advance(untilFailedMayRelease(t, f, op))

	settled, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: evidence, EffectsRemoved: true})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, settled.State)
	last := settled.Journal[len(settled.Journal)-1]
	assert.Equal(t, operation.EventOperatorFailed, last.Type)
	assert.Equal(t, evidence+"\n"+operatortools.EffectsRemovedStatement, last.Detail, "the operator's statement is journaled")
	_, err = f.family.Approve(alice, settled)
	requireFailure(t, err, tools.CodePreconditionFailed)

	again, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-after-incident"))
	require.NoError(t, err)
	assert.False(t, again.Deduplicated, "a FAILED operation no longer holds the target")
	assert.Equal(t, operation.StateSucceeded, again.Operation.State)
}

func TestResolveFailedIsRefusedWhileEffectsAreKnown(t *testing.T) {
	f := newFixture(t, 0)
	incident := walk(t, operation.Event{Type: operation.EventProbeMultiple, Duplicates: 2})
	incidentNoCount := walk(t, operation.Event{Type: operation.EventProbeMultiple})
	withResource := walk(t, operation.Event{Type: operation.EventProbeBudgetExhausted})
	withResource.ResourceID = "ticket-9001" // e.g. a create reported it but verification never confirmed it
	noEffect := walk(t, operation.Event{Type: operation.EventProbeBudgetExhausted})
	for _, tc := range []struct {
		name       string
		op         operation.Operation
		resourceID string
	}{
		{"incident with duplicates", incident, ""},
		{"incident outcome", incidentNoCount, ""},
		{"recorded resource", withResource, ""},
		{"resource named by the operator", noEffect, "ticket-9001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, tc.op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "nothing to keep", ResourceID: tc.resourceID})
			fail := requireFailure(t, err, tools.CodePreconditionFailed)
			assert.Contains(t, fail.Message, "effects of this operation exist")
			assert.Contains(t, fail.Message, "effects_removed: true")
			require.NotNil(t, fail.Next)
			assert.Equal(t, map[string]string{"handle": tc.op.Handle}, fail.Next.Arguments, "the operator is not shown alice's operation_id")
		})
	}
	_, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, incident, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "kept ticket-9001", ResourceID: "ticket-9001", EffectsRemoved: true})
	requireFailure(t, err, tools.CodeInvalidArgument)
}

func TestResolveFailedWithoutKnownEffectsNeedsNoStatement(t *testing.T) {
	f := newFixture(t, 0)
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	require.Equal(t, operation.StateUnknown, sub.Operation.State)
	require.Empty(t, sub.Operation.ResourceID)
	op, err := f.ex.Transition(context.Background(), release.ToolCreate, sub.Operation, operation.Event{
		Type: operation.EventProbeBudgetExhausted, At: f.clock.Now(), Source: "reconciler"}, nil)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, op.State)

	// Until the provider's search covers the dispatch, absence is not proven.
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "no ticket in the release queue"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "cannot yet prove")
	f.clock.Advance(untilCommitHorizon(t, f, op))
	// Past the horizon, but not the grace: a late commit is still possible.
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "no ticket in the release queue"})
	fail = requireFailure(t, err, tools.CodeTemporaryUnavailable)
	assert.Contains(t, fail.Message, "resolve again after")
	f.clock.Advance(untilFailedMayRelease(t, f, op))

	settled, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "no ticket in the release queue"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, settled.State)
	assert.Equal(t, "no ticket in the release queue", settled.Journal[len(settled.Journal)-1].Detail)
}

func TestApproveNeedsADeployerOfTheServiceOrAnOperator(t *testing.T) {
	proven := walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9472", Receipt: "receipt-61b8"})
	unknown := walk(t)
	tenantMate := tools.Caller{ClientID: "cursor", UserID: "dev-bob", TenantID: "team-payments"}
	billingDeployer := tools.Caller{ClientID: "cursor", UserID: "dev-carol", TenantID: "team-billing", Roles: []string{policy.RoleDeployer}}
	for _, tc := range []struct {
		name   string
		caller tools.Caller
	}{
		{"tenant-mate without roles", tenantMate},
		{"tenant-mate with another role", tools.Caller{ClientID: "cursor", UserID: "dev-bob", TenantID: "team-payments", Roles: []string{"viewer"}}},
		{"deployer of a team not granted the service", billingDeployer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []operation.Operation{proven, unknown} {
				_, err := approver.Approve(tc.caller, op)
				fail := requireFailure(t, err, tools.CodeForbidden)
				assert.False(t, fail.RetryAllowed)
				assert.NotContains(t, fail.Message, "unknown", "a forbidden caller learns nothing about the ticket's state")
			}
		})
	}

	// Allowed callers on another client see no operation_id, only the handle.
	teamMateDeployer := tools.Caller{ClientID: "cursor", UserID: "dev-bob", TenantID: "team-payments", Roles: []string{policy.RoleDeployer}}
	for name, caller := range map[string]tools.Caller{"operator": operator, "deployer on another client": teamMateDeployer} {
		t.Run(name, func(t *testing.T) {
			ok, err := approver.Approve(caller, proven)
			require.NoError(t, err)
			assert.Nil(t, ok.OperationID, "another client's operation_id is never shown")
			assert.Equal(t, proven.Handle, ok.TicketHandle)
			require.NoError(t, validate(t, schema(t, release.ApproveOutputSchema()), ok))

			_, err = approver.Approve(caller, unknown)
			fail := requireFailure(t, err, tools.CodePreconditionFailed)
			assert.Equal(t, map[string]string{"handle": unknown.Handle}, fail.Next.Arguments)
		})
	}
}

func TestResolveRefusesOperationsThatAreNotEscalated(t *testing.T) {
	f := newFixture(t, 0)
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, sub.Operation.State)
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, sub.Operation, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "looks wrong"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "SUCCEEDED")

	stored, err := f.st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, sub.Operation.Version, stored.Version)
}

// untilCommitHorizon is how far the clock must move before the provider's
// search can prove op absent: past the settle window and past the latest
// commit deadline op's dispatches carried.
// untilFailedMayRelease is how long until a FAILED resolution of op may
// release its fact: the provider's search must cover the commit horizon
// and the grace of a provider that breaks its promise by less.
func untilFailedMayRelease(t *testing.T, f fixture, op operation.Operation) time.Duration {
	t.Helper()
	return max(untilCommitHorizon(t, f, op), f.ex.AuditCoverage(op).Sub(f.clock.Now()))
}

func untilCommitHorizon(t *testing.T, f fixture, op operation.Operation) time.Duration {
	t.Helper()
	wait := f.family.Recovery().SettleWindow
	if horizon, ok := op.CommitHorizon(); ok {
		wait = max(wait, horizon.Sub(f.clock.Now()))
	}
	return wait
}

// approve_rollout says "proven absent" of a RETRYABLE ticket only where
// the effect is ruled out (operation.EffectRuledOut), as get_operation's
// next action and tasks/get do: a search past the dispatch but not past a
// promised commit horizon proves no absence an earlier request may still
// overtake.
func TestApproveCallsARetryableTicketProvenAbsentOnlyWhereItsEffectIsRuledOut(t *testing.T) {
	unbounded := walk(t, operation.Event{Type: operation.EventProbeNotFound})
	require.False(t, unbounded.EffectRuledOut())
	_, err := approver.Approve(alice, unbounded)
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.NotContains(t, fail.Message, "proven absent")
	assert.Contains(t, fail.Message, "may still commit")

	bounded := walk(t, operation.Event{Type: operation.EventProbeNotFound, LateCommitsBounded: true})
	require.True(t, bounded.EffectRuledOut())
	_, err = approver.Approve(alice, bounded)
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "proven absent")
}
