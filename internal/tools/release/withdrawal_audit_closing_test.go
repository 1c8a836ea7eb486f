package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// withdrawnWithAnExhaustedAudit: the create timed out, was proven absent
// past its horizon and withdrawn by its owner; its withdrawal's audit then
// ended for an operator (duplicate_audit_exhausted) without reporting any
// effect.
func withdrawnWithAnExhaustedAudit(t *testing.T, f fixture) operation.Operation {
	t.Helper()
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	op := sub.Operation
	require.Equal(t, operation.StateUnknown, op.State)
	f.clock.Advance(untilCommitHorizon(t, f, op) + time.Second)
	step := func(ev operation.Event) {
		t.Helper()
		ev.At = f.clock.Now()
		op, err = f.ex.Transition(ctx, release.ToolCreate, op, ev, nil)
		require.NoError(t, err)
	}
	step(operation.Event{Type: operation.EventProbeNotFound, LateCommitsBounded: true, NextAt: f.clock.Now().Add(time.Minute)})
	step(operation.Event{Type: operation.EventClientCancelled, NextAt: f.clock.Now().Add(time.Minute)})
	require.True(t, op.WithdrawalAuditPending())
	step(operation.Event{Type: operation.EventAuditExhausted, Detail: "escalated to risk-oncall: withdrawal audit could not complete"})
	require.True(t, op.WithdrawalAuditEscalated())
	require.Empty(t, op.EffectsReportedAfterFailure())
	return op
}

// A withdrawal's audit that could not finish leaves an operator to search
// the provider for the fact. The operator closes it through
// resolve_operation as an effect reported after failure is closed: only
// once the provider shows nothing no operation holds, and with the
// operator's word that no request can still commit. Until then the record
// is kept; closed, it is an ordinary FAILED operation.
func TestAWithdrawalAuditThatCouldNotFinishIsClosedByAnOperatorOnceNothingIsLeft(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	op := withdrawnWithAnExhaustedAudit(t, f)
	assert.True(t, op.AwaitsOperator())
	p := op.Payload
	late, err := f.client.CreateTicket(ctx, provider.TicketInput{Service: p["service"], Commit: p["commit"], Environment: p["environment"], RequestedBy: "alice"})
	require.NoError(t, err)

	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "looked"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "could not finish")

	_, err = closeReported(f, f.family, op, "searched the console")
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, late.TicketID, "a ticket no operation holds is left")

	require.True(t, f.sim.RemoveTicket(late.TicketID))
	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "removed it (INC-9)", EffectsRemoved: true})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "late_commits_ruled_out")

	closed, err := closeReported(f, f.family, op, "removed it (INC-9)")
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, closed.State)
	assert.False(t, closed.AwaitsOperator())
	last := closed.Journal[len(closed.Journal)-1]
	assert.Equal(t, "withdrawal_audit_closed", last.Result)
	assert.Contains(t, last.Detail, "INC-9")
	assert.Contains(t, last.Detail, "nothing is found at the provider for the fact")

	_, err = closeReported(f, f.family, closed, "again")
	requireFailure(t, err, tools.CodePreconditionFailed)
}

// Before its audit ends the withdrawn operation is the reconciler's, not
// an operator's: nothing is open to close.
func TestAWithdrawalWhoseAuditIsStillDueIsNotAnOperatorsToClose(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	op := sub.Operation
	f.clock.Advance(untilCommitHorizon(t, f, op) + time.Second)
	for _, ev := range []operation.Event{
		{Type: operation.EventProbeNotFound, LateCommitsBounded: true, NextAt: f.clock.Now().Add(time.Minute)},
		{Type: operation.EventClientCancelled, NextAt: f.clock.Now().Add(time.Minute)},
	} {
		ev.At = f.clock.Now()
		op, err = f.ex.Transition(ctx, release.ToolCreate, op, ev, nil)
		require.NoError(t, err)
	}
	require.True(t, op.WithdrawalAuditPending())

	_, err = closeReported(f, f.family, op, "nothing to see")
	requireFailure(t, err, tools.CodePreconditionFailed)
}

// A caller who asks about a withdrawal whose audit could not finish is not
// told its request failed without effect and may be asked for again: if
// the provider committed it late, a new request would make a second
// ticket. It is told an operator is checking, and to wait for them. Once
// the operator has closed the audit, the ordinary answer stands.
func TestACallerIsNotInvitedToRetryAWithdrawalWhoseAuditCouldNotFinish(t *testing.T) {
	f := newFixture(t, 0)
	op := withdrawnWithAnExhaustedAudit(t, f)

	v := tools.ViewOf(op, "get_operation", "operation_id")
	assert.True(t, v.IsError)
	assert.Equal(t, tools.CodeOperationFailed, v.Code)
	assert.False(t, v.RetryAllowed, "a new request could duplicate a late commit nobody has ruled out")
	assert.NotContains(t, v.Message, "failed without effect")
	assert.Contains(t, v.Message, "could not be checked")
	assert.Contains(t, v.Next.Hint, "operator")
	assert.NotContains(t, v.Next.Hint, "new attempt")
	res := f.family.Render(alice, tools.Submission{Operation: op}).Body.(release.Result)
	assert.Equal(t, v.Message, res.Message, "a replay of the create says the same")

	closed, err := closeReported(f, f.family, op, "searched the console (INC-10)")
	require.NoError(t, err)
	v = tools.ViewOf(closed, "get_operation", "operation_id")
	assert.True(t, v.RetryAllowed)
	assert.Equal(t, "failed without effect", v.Message)
}
