package release_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// failedWithAReportedTicket: the create was refused (FAILED, business key
// released), yet the provider made a ticket for its target after all, which
// a stale dispatcher then reported (dispatch_evidence_recorded on FAILED).
func failedWithAReportedTicket(t *testing.T, f fixture) (operation.Operation, string) {
	t.Helper()
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateReject, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	require.Equal(t, operation.StateFailed, sub.Operation.State)
	p := sub.Operation.Payload
	ticket, err := f.client.CreateTicket(ctx, provider.TicketInput{Service: p["service"], Commit: p["commit"], Environment: p["environment"], RequestedBy: "alice"})
	require.NoError(t, err)
	op, err := f.ex.Transition(ctx, release.ToolCreate, sub.Operation, operation.Event{Type: operation.EventEvidenceRecorded,
		At: f.clock.Now(), Source: "stale_dispatcher", ResourceID: ticket.TicketID}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{ticket.TicketID}, op.EffectsReportedAfterFailure())
	return op, ticket.TicketID
}

// An effect reported after an operation FAILED is closed by an operator
// who removed it at the provider: resolve_operation FAILED with
// effects_removed, checked against the provider (the reported ticket must
// be gone), journalled, FAILED staying FAILED. Nothing else closes it: not
// the operator's word while the ticket is still there, not a SUCCEEDED
// resolution (the fact's business key was released and may be another
// operation's by now).
func TestAnEffectReportedAfterFailureIsClosedOnlyOnceTheProviderNoLongerHasIt(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	op, ticket := failedWithAReportedTicket(t, f)
	f.clock.Advance(untilCommitHorizon(t, f, op))

	_, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "looked"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, ticket, "names the effect to remove")

	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "cancelled it", EffectsRemoved: true})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, ticket, "the provider still has it")

	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded,
		Evidence: "keep it", ResourceID: ticket})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "FAILED")

	require.True(t, f.sim.RemoveTicket(ticket))
	closed, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "cancelled it in the console (INC-7)", EffectsRemoved: true})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, closed.State)
	assert.Empty(t, closed.EffectsReportedAfterFailure())
	last := closed.Journal[len(closed.Journal)-1]
	assert.Equal(t, operation.EventOperatorFailed, last.Type)
	assert.Equal(t, operation.StateFailed, last.From)
	assert.Equal(t, operator.UserID, last.Actor)
	assert.Contains(t, last.Detail, "INC-7")
	assert.Contains(t, last.Detail, operatortools.EffectsRemovedStatement)

	stored, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Empty(t, stored.EffectsReportedAfterFailure())
	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, stored, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "again", EffectsRemoved: true})
	requireFailure(t, err, tools.CodePreconditionFailed)
}
