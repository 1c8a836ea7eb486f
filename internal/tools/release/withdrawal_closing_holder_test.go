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
	"github.com/intentgate/intentgate/internal/tools/release"
)

// A next holder that took a ticket it found by search may still see its
// own create land, inside its horizon and grace: its duplicate audit is
// pending. Until that audit is done, the ticket is not the holder's
// verified effect, and the operator's closing of the withdrawal that left
// it is refused (retryable); once the audit is clean, it closes.
func TestAWithdrawalIsNotClosedWhileTheHolderThatTookItsTicketIsStillAudited(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	w := withdrawnWithAnExhaustedAudit(t, f)
	p := w.Payload
	// The withdrawn create commits late (A): the provider broke its promise.
	a, err := f.client.CreateTicket(ctx, provider.TicketInput{Service: p["service"], Commit: p["commit"], Environment: p["environment"], RequestedBy: "alice"})
	require.NoError(t, err)

	// The next request for the fact times out; its probe finds A, and it
	// takes A as its own.
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
	sub, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-payments-again"))
	require.NoError(t, err)
	h := sub.Operation
	require.Equal(t, operation.StateUnknown, h.State)
	f.clock.Advance(untilCommitHorizon(t, f, h) + 2*time.Second)
	res, err := f.family.Probe(ctx, h)
	require.NoError(t, err)
	require.Equal(t, []string{a.TicketID}, res.Matches)
	require.True(t, res.Authoritative)
	// As the reconciler's probe records it: the duplicate audit is due.
	h, err = f.ex.Transition(ctx, release.ToolCreate, h, operation.Event{Type: operation.EventProbeFoundOne, At: f.clock.Now(),
		ResourceID: a.TicketID, Receipt: tools.Receipt(h.Handle, a.TicketID), Source: res.Source, Result: "one_exact_match",
		NextAt: f.ex.AuditAt(h, f.family.Recovery(), true)}, nil)
	require.NoError(t, err)
	require.True(t, h.EffectFoundBySearch())
	require.True(t, h.AuditPending(), "a ticket found by search is audited after one dispatch too")
	require.True(t, f.clock.Now().Before(f.ex.AuditCoverage(h)), "the holder's own create may still land")

	_, err = closeReported(f, f.family, w, "searched the console (INC-11)")
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.True(t, fail.RetryAllowed)
	assert.Contains(t, fail.Message, h.Handle)
	assert.Contains(t, fail.Message, "duplicate audit not yet done")

	// The holder's audit comes out clean: the ticket is its verified effect.
	f.clock.Advance(f.ex.AuditCoverage(h).Sub(f.clock.Now()) + 2*time.Second)
	h, err = f.ex.Transition(ctx, release.ToolCreate, h, operation.Event{Type: operation.EventAuditClean, At: f.clock.Now(),
		Source: res.Source, Result: "one_exact_match"}, nil)
	require.NoError(t, err)
	require.False(t, h.AuditPending())
	_, err = closeReported(f, f.family, w, "searched the console (INC-11)")
	assert.NoError(t, err)
}
