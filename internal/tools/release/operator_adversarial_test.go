package release_test

// resolve_operation against what an adversarial review found: an
// operator's word never makes a receipt the provider did not confirm, and
// the journal tells the server's statements from the operator's text.

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
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// brokenDedupeRisk is a Risk API whose lookup by request key reports the
// provider's own dedupe broken (several reviews for one key).
type brokenDedupeRisk struct{}

func (brokenDedupeRisk) GetOrder(context.Context, string) (provider.Order, error) {
	return provider.Order{OrderID: "O20260728001", MerchantID: "M1"}, nil
}
func (brokenDedupeRisk) CreateReview(context.Context, string, provider.CreateReviewInput) (provider.Review, error) {
	return provider.Review{}, fmt.Errorf("unused")
}
func (brokenDedupeRisk) FindReviewByRequestKey(context.Context, string) (provider.Review, bool, error) {
	return provider.Review{}, false, fmt.Errorf("find: %w", provider.ErrMultipleMatches)
}

// A provider that reports several reviews for one request key without
// naming them (a broken dedupe) confirms none: the stand-ins the probe
// counts them with are never a resource an operator may keep.
func TestResolveSucceededDoesNotAcceptAnIDTheProviderNeverNamed(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	family := riskreview.New(brokenDedupeRisk{}, riskreview.DefaultRecovery())
	op := insertedRiskReview(t, f, "review-incident-0001")
	res, err := family.Probe(ctx, op)
	require.NoError(t, err)
	for _, ev := range []operation.Event{
		{Type: operation.EventResponseMissing, At: f.clock.Now()},
		{Type: operation.EventProbeMultiple, At: f.clock.Now(), Duplicates: len(res.Matches), Detail: res.Detail},
	} {
		op, err = f.st.Transition(ctx, op, ev)
		require.NoError(t, err)
	}
	require.Equal(t, operation.StateEscalated, op.State)

	settled, err := operatortools.Resolve(ctx, f.ex, family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionSucceeded, Evidence: "kept one", ResourceID: "unnamed-1"})
	assert.Error(t, err, "a placeholder is not a resource the provider confirmed; got receipt %q for %q", settled.Receipt, settled.ResourceID)
}

// An operation escalated because its duplicate audit could not complete is
// resolved SUCCEEDED only when a search taken now shows the kept ticket as
// its one effect: with a second ticket there, the resolution is refused and
// no rollout can be approved over it.
func TestResolveSucceededAfterAnExhaustedDuplicateAuditMustSearchForDuplicates(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	op := sub.Operation
	require.Equal(t, operation.StateUnknown, op.State)
	// The reconciler saw one ticket (index lag hid the other), scheduled the
	// duplicate audit, and the audit ran out of searches.
	op, err = f.ex.Transition(ctx, release.ToolCreate, op, operation.Event{Type: operation.EventProbeFoundOne, At: f.clock.Now(),
		ResourceID: "ticket-9001", Receipt: tools.Receipt(op.Handle, "ticket-9001"), NextAt: f.clock.Now().Add(time.Minute)}, nil)
	require.NoError(t, err)
	require.True(t, op.AuditPending())
	op, err = f.ex.Transition(ctx, release.ToolCreate, op, operation.Event{Type: operation.EventAuditExhausted, At: f.clock.Now(),
		Source: "reconciler", Detail: "duplicate audit could not complete"}, nil)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, op.State)
	f.clock.Advance(untilCommitHorizon(t, f, op))
	found, err := f.family.Probe(ctx, op)
	require.NoError(t, err)
	require.Len(t, found.Matches, 2, "the provider, asked now, shows the duplicate")

	settled, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionSucceeded, Evidence: "ticket-9001 is fine"})
	if assert.Error(t, err, "resolved SUCCEEDED while two tickets exist") {
		return
	}
	_, err = f.family.Approve(alice, settled)
	assert.Error(t, err, "rollout approved over an undetected duplicate ticket")
}

// The operator's evidence can not pose as the server's own statements nor
// carry bidi or zero-width characters: the journal tells a statement the
// server checked from text the operator typed.
func TestResolveEvidenceCannotForgeTheServersStatements(t *testing.T) {
	for name, evidence := range map[string]string{
		"forged statement": "nothing there\n" + operatortools.EffectsRemovedStatement,
		"bidi override":    "ok \u202eDELIAF\u202c",
		"zero width":       "ok\u200b\u2028line",
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 0)
			ctx := context.Background()
			f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
			sub, err := f.submit(t, alice, paymentsArgs)
			require.NoError(t, err)
			op, err := f.ex.Transition(ctx, release.ToolCreate, sub.Operation, operation.Event{
				Type: operation.EventProbeBudgetExhausted, At: f.clock.Now(), Source: "reconciler"}, nil)
			require.NoError(t, err)
			f.clock.Advance(untilCommitHorizon(t, f, op))
			settled, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{
				Outcome: operatortools.ResolutionFailed, Evidence: evidence})
			if err == nil {
				t.Errorf("accepted; journal detail %q", settled.Journal[len(settled.Journal)-1].Detail)
				return
			}
			requireFailure(t, err, tools.CodeInvalidArgument)
		})
	}
}

// A resource id only the journal names as an effect (dispatch evidence) is
// a known effect: FAILED needs the operator's effects_removed statement,
// even once the ticket has vanished.
func TestResolveFailedCountsJournalledEvidenceAsAKnownEffect(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	op, err := f.ex.Transition(ctx, release.ToolCreate, sub.Operation, operation.Event{Type: operation.EventEvidenceRecorded,
		At: f.clock.Now(), ResourceID: "ticket-9001", Detail: "stale dispatcher saw ticket-9001"}, nil)
	require.NoError(t, err)
	op, err = f.ex.Transition(ctx, release.ToolCreate, op, operation.Event{Type: operation.EventProbeBudgetExhausted,
		At: f.clock.Now(), Source: "reconciler"}, nil)
	require.NoError(t, err)
	require.Empty(t, op.ResourceID)
	require.Equal(t, []string{"ticket-9001"}, op.EffectEvidence())
	require.True(t, f.sim.RemoveTicket("ticket-9001"))
	f.clock.Advance(untilCommitHorizon(t, f, op))

	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "no ticket"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "effects_removed")
}

// A FAILED resolution naming the removed ticket keeps it in the journal:
// the failed operation names no resource (its result and packet would
// otherwise show a live-looking ticket).
func TestResolveFailedDoesNotPromoteARemovedTicketToTheResource(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	op := escalated(t, f) // ticket-9001 and ticket-9002
	require.True(t, f.sim.RemoveTicket("ticket-9001"))
	require.True(t, f.sim.RemoveTicket("ticket-9002"))
	f.clock.Advance(untilFailedMayRelease(t, f, op))
	settled, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "both cancelled", ResourceID: "ticket-9001", EffectsRemoved: true})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, settled.State)
	assert.Empty(t, settled.ResourceID, "a FAILED operation names no resource")
}

// An incident is two tickets the provider confirmed. Resolving it
// SUCCEEDED records one effect, issues its receipt and lets the rollout be
// approved, so it is recorded only once a search taken now shows the kept
// ticket as the only one: the operator's word that the other was removed
// is checked, never taken.
func TestResolveSucceededOnAnIncidentIsRefusedWhileAnotherMatchStillExists(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	op := escalated(t, f) // ticket-9001 and ticket-9002
	f.clock.Advance(untilCommitHorizon(t, f, op))

	_, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionSucceeded, Evidence: "kept ticket-9001, cancelled ticket-9002", ResourceID: "ticket-9001"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "ticket-9002")
	stored, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, stored.State, "nothing recorded")
	_, err = f.family.Approve(alice, stored)
	require.Error(t, err, "no rollout approved over the duplicate")

	require.True(t, f.sim.RemoveTicket("ticket-9002"))
	settled, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionSucceeded, Evidence: "kept ticket-9001, removed ticket-9002", ResourceID: "ticket-9001"})
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, settled.State)
	assert.Equal(t, "ticket-9001", settled.ResourceID)
}
