package release_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
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
		{"proven absent", walk(t, operation.Event{Type: operation.EventProbeNotFound}), "awaits the reconciler's retry"},
		{"operator failed", walk(t, operation.Event{Type: operation.EventProbeMultiple}, operation.Event{Type: operation.EventOperatorFailed}), "failed without effect"},
		{"pending", pending, "still in flight"},
		{"another family", foreignTool, "is not a deployment ticket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := release.Approve(tc.op)
			fail := requireFailure(t, err, tools.CodePreconditionFailed)
			assert.Contains(t, fail.Message, tc.want)
			assert.False(t, fail.RetryAllowed)
			require.NotNil(t, fail.Next)
			assert.Equal(t, packet.ToolGetOperation, fail.Next.Tool)
			assert.Equal(t, map[string]string{"operation_id": tc.op.Key.OperationID}, fail.Next.Arguments)
		})
	}

	ok, err := release.Approve(walk(t, operation.Event{Type: operation.EventProbeFoundOne, ResourceID: "ticket-9472", Receipt: "receipt-61b8"}))
	require.NoError(t, err)
	assert.Equal(t, release.Approval{TicketHandle: ok.TicketHandle, OperationID: "deploy-ticket-probe-1", TicketID: "ticket-9472", EffectReceipt: "receipt-61b8", Decision: "approved"}, ok)
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
	_, err := release.Approve(op)
	requireFailure(t, err, tools.CodePreconditionFailed)

	_, err = release.Resolve(context.Background(), f.ex, alice, op, release.ResolutionSucceeded, "kept ticket-9001", "ticket-9001")
	requireFailure(t, err, tools.CodeForbidden)
	_, err = release.Resolve(context.Background(), f.ex, operator, op, release.ResolutionSucceeded, "checked release queue", "")
	requireFailure(t, err, tools.CodeInvalidArgument)
	_, err = release.Resolve(context.Background(), f.ex, operator, op, "MAYBE", "checked", "ticket-9001")
	requireFailure(t, err, tools.CodeInvalidArgument)
	_, err = release.Resolve(context.Background(), f.ex, operator, op, release.ResolutionSucceeded, strings.Repeat("x", 1001), "ticket-9001")
	requireFailure(t, err, tools.CodeInvalidArgument)
	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, stored.State, "refused resolutions change nothing")

	evidence := "Two tickets in the release queue; kept ticket-9001, cancelled ticket-9002 (INC-123)."
	settled, err := release.Resolve(context.Background(), f.ex, operator, op, release.ResolutionSucceeded, evidence, "ticket-9001")
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, settled.State)
	assert.Equal(t, operation.OutcomeCommittedAndVerified, settled.Outcome)
	assert.Equal(t, "ticket-9001", settled.ResourceID)
	assert.Equal(t, tools.Receipt(op.Handle, "ticket-9001"), settled.Receipt)
	last := settled.Journal[len(settled.Journal)-1]
	assert.Equal(t, operation.EventOperatorSucceeded, last.Type)
	assert.Equal(t, "op-olga", last.Actor)
	assert.Equal(t, release.SourceOperator, last.Source)
	assert.Equal(t, evidence, last.Detail)

	stored, err = f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, settled.Version, stored.Version)
	approval, err := release.Approve(stored)
	require.NoError(t, err)
	assert.Equal(t, "ticket-9001", approval.TicketID)

	// The stale copy cannot be resolved again; the settled one is not ESCALATED.
	_, err = release.Resolve(context.Background(), f.ex, operator, op, release.ResolutionFailed, "second opinion", "")
	requireFailure(t, err, tools.CodePreconditionFailed)
	_, err = release.Resolve(context.Background(), f.ex, operator, stored, release.ResolutionFailed, "second opinion", "")
	requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
}

func TestResolveFailedReleasesTheBusinessKey(t *testing.T) {
	f := newFixture(t, 0)
	op := escalated(t, f)
	settled, err := release.Resolve(context.Background(), f.ex, operator, op, release.ResolutionFailed, "both tickets cancelled by release team", "")
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, settled.State)
	_, err = release.Approve(settled)
	requireFailure(t, err, tools.CodePreconditionFailed)

	again, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-after-incident"))
	require.NoError(t, err)
	assert.False(t, again.Deduplicated, "a FAILED operation no longer holds the target")
	assert.Equal(t, operation.StateSucceeded, again.Operation.State)
}

func TestResolveRefusesOperationsThatAreNotEscalated(t *testing.T) {
	f := newFixture(t, 0)
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, sub.Operation.State)
	_, err = release.Resolve(context.Background(), f.ex, operator, sub.Operation, release.ResolutionFailed, "looks wrong", "")
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "SUCCEEDED")

	stored, err := f.st.Get(context.Background(), sub.Operation.Handle)
	require.NoError(t, err)
	assert.Equal(t, sub.Operation.Version, stored.Version)
}
