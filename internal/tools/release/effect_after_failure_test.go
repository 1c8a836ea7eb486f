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
	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "cancelled it in the console (INC-7)", EffectsRemoved: true})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "late_commits_ruled_out", "the report disproved the promise: only the operator can rule another out")
	closed, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "cancelled it in the console (INC-7)", EffectsRemoved: true, LateCommitsRuledOut: true})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, closed.State)
	assert.Empty(t, closed.EffectsReportedAfterFailure())
	last := closed.Journal[len(closed.Journal)-1]
	assert.Equal(t, operation.EventOperatorFailed, last.Type)
	assert.Equal(t, operation.StateFailed, last.From)
	assert.Equal(t, operator.UserID, last.Actor)
	assert.Contains(t, last.Detail, "INC-7")
	assert.Contains(t, last.Detail, operatortools.ReportedEffectsClosedStatement)

	stored, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	assert.Empty(t, stored.EffectsReportedAfterFailure())
	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, stored, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: "again", EffectsRemoved: true, LateCommitsRuledOut: true})
	requireFailure(t, err, tools.CodePreconditionFailed)
}

// closeReported is the operator's closing of op's reported effects.
func closeReported(f fixture, family tools.WriteTool, op operation.Operation, evidence string) (operation.Operation, error) {
	return operatortools.Resolve(context.Background(), f.ex, family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: evidence, EffectsRemoved: true, LateCommitsRuledOut: true})
}

// A ticket for the fact that no operation owns as its verified effect
// keeps the operation open even once the reported one is gone: closed, the
// caller would be told "failed without effect, ask again" and make another.
func TestAnEffectReportedAfterFailureIsNotClosedWhileAnotherTicketNoOperationOwnsRemains(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	op, reported := failedWithAReportedTicket(t, f)
	p := op.Payload
	unowned, err := f.client.CreateTicket(ctx, provider.TicketInput{Service: p["service"], Commit: p["commit"], Environment: p["environment"], RequestedBy: "alice"})
	require.NoError(t, err)
	f.clock.Advance(untilCommitHorizon(t, f, op))
	require.True(t, f.sim.RemoveTicket(reported))

	_, err = closeReported(f, f.family, op, "cancelled it")
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, unowned.TicketID)
}

// A search that still lists the reported ticket, though reading it by id
// finds none, proves nothing yet: the operation stays open.
func TestAnEffectReportedAfterFailureIsNotClosedOnASearchThatStillListsIt(t *testing.T) {
	f := newFixture(t, 0)
	op, reported := failedWithAReportedTicket(t, f)
	f.clock.Advance(untilCommitHorizon(t, f, op))
	denied := release.New(flakyAPI{ReleaseAPI: f.client, getErr: map[string]error{
		reported: &provider.Error{Class: provider.ClassNotFound, Op: provider.OpGetTicket, StatusCode: 404},
	}}, grants, f.family.Recovery())

	_, err := closeReported(f, denied, op, "cancelled it")
	assert.Error(t, err)
	stored, gerr := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, gerr)
	assert.Equal(t, []string{reported}, stored.EffectsReportedAfterFailure(), "still open")
}

// The closing's journal entry names what it closed and how each was
// accounted for, so the record outlives the item's retention in the audit.
func TestClosingAnEffectReportedAfterFailureNamesWhatItClosed(t *testing.T) {
	f := newFixture(t, 0)
	op, reported := failedWithAReportedTicket(t, f)
	f.clock.Advance(untilCommitHorizon(t, f, op))
	require.True(t, f.sim.RemoveTicket(reported))
	closed, err := closeReported(f, f.family, op, "cancelled it in the console")
	require.NoError(t, err)
	last := closed.Journal[len(closed.Journal)-1]
	assert.Contains(t, last.Detail, reported)
}

// The reported ticket may be the very one a later operation of the same
// fact found and verified as its own (its search is by target): then it is
// accounted for, and closing must not demand that the fact's verified
// effect be removed.
func TestAnEffectReportedAfterFailureThatTheFactsHolderVerifiedAsItsOwnIsAccountedFor(t *testing.T) {
	f := newFixture(t, 0)
	a, reported := failedWithAReportedTicket(t, f)
	b := laterHolderVerifiesTheReportedTicket(t, f, reported)

	closed, err := closeReported(f, f.family, a, "the reported ticket is the fact's verified effect now")
	require.NoError(t, err)
	assert.Empty(t, closed.EffectsReportedAfterFailure())
	detail := closed.Journal[len(closed.Journal)-1].Detail
	assert.Contains(t, detail, "is the verified effect of the operation holding the fact now", "says whose effect it is")
	assert.NotContains(t, detail, b.Handle, "without naming it: the journal is shown to the owner, who may not see the holder")
}

// laterHolderVerifiesTheReportedTicket: a later operation for the same
// fact, whose create timed out, finds the reported ticket by target and
// records it as its own verified effect: the fact's holder now.
func laterHolderVerifiesTheReportedTicket(t *testing.T, f fixture, reported string) operation.Operation {
	t.Helper()
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
	sub, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-payments-again"))
	require.NoError(t, err)
	b := sub.Operation
	require.Equal(t, operation.StateUnknown, b.State, b.Outcome)
	f.clock.Advance(untilCommitHorizon(t, f, b) + release.CommitAllowance + time.Second)
	b, err = f.ex.Transition(ctx, release.ToolCreate, b, operation.Event{Type: operation.EventProbeFoundOne, At: f.clock.Now(),
		ResourceID: reported, Receipt: tools.Receipt(b.Handle, reported), Source: release.ProbeSource, Result: "one_exact_match"}, nil)
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, b.State)
	return b
}

// What the operator is told never says to remove a reported effect
// unconditionally: it may be the verified effect of the operation holding
// the fact now, which stays.
func TestAnOperatorIsNotToldToRemoveAReportedEffectThatMayBeTheHoldersVerifiedEffect(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	a, reported := failedWithAReportedTicket(t, f)
	laterHolderVerifiesTheReportedTicket(t, f, reported)

	_, err := operatortools.Resolve(ctx, f.ex, f.family, operator, a, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "looked"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "holding the fact")
	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, a, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "looked"})
	fail = requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "holding the fact")
}

// The journal says what the search showed: a reported ticket that is not
// there any more is "not found", even when it had been the holder's.
func TestClosingJournalsWhatTheSearchShowedForEachReportedEffect(t *testing.T) {
	f := newFixture(t, 0)
	a, reported := failedWithAReportedTicket(t, f)
	b := laterHolderVerifiesTheReportedTicket(t, f, reported)
	require.True(t, f.sim.RemoveTicket(reported))

	closed, err := closeReported(f, f.family, a, "removed it")
	require.NoError(t, err)
	d := closed.Journal[len(closed.Journal)-1].Detail
	assert.NotContains(t, d, "is the verified effect of", "the search found no such ticket")
	assert.Contains(t, d, reported+" is not found at the provider")
	assert.Contains(t, d, "the verified effect of the operation holding the fact now is not found", "and says the holder's verified effect is missing")
	assert.NotContains(t, d, b.Handle, "without naming the holder")
}

// A match that may be the effect of the operation holding the fact, not
// yet settled, keeps the closing refused, naming that operation: the
// operator must not remove what may be its effect.
func TestAClosingRefusedForAnUnsettledHoldersPossibleEffectNamesTheHolder(t *testing.T) {
	f := newFixture(t, 0)
	a, reported := failedWithAReportedTicket(t, f)
	require.True(t, f.sim.RemoveTicket(reported))
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}}})
	sub, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-payments-again"))
	require.NoError(t, err)
	require.Equal(t, operation.StateUnknown, sub.Operation.State)
	f.clock.Advance(untilCommitHorizon(t, f, sub.Operation) + release.CommitAllowance + time.Second)

	_, err = closeReported(f, f.family, a, "removed it")
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, sub.Operation.Handle)
}
