package release_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/provider"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

func TestCreateIsVerifiedByAuthoritativeReadAndIssuesReceipt(t *testing.T) {
	f := newFixture(t, 0)
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)

	op := sub.Operation
	assert.Equal(t, operation.StateSucceeded, op.State)
	assert.Equal(t, operation.OutcomeCommittedAndVerified, op.Outcome)
	assert.Equal(t, "ticket-9001", op.ResourceID)
	assert.Equal(t, tools.Receipt(op.Handle, "ticket-9001"), op.Receipt)
	assert.Equal(t, "deploy-ticket-payments-8bc911d", sub.OperationID)
	assert.Equal(t, paymentsTarget(), op.Target)
	last := op.Journal[len(op.Journal)-1]
	assert.Equal(t, "effect_verifier", last.Source)
	assert.Equal(t, "expected_effect_present", last.Result)

	stats := f.sim.Stats()
	assert.Equal(t, 1, stats.CreateCalls)
	assert.Equal(t, 1, stats.GetCalls, "the create answer is weak evidence: it must be confirmed by GET /tickets/{id}")
	assert.Equal(t, map[string]int{"payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu": 1}, stats.TicketsByTarget)
	assert.False(t, stats.ForeignAuthorizationSeen)

	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateSucceeded, stored.State)
	assert.Equal(t, op.Receipt, stored.Receipt)

	result := release.NewResult(alice, sub)
	require.NoError(t, validate(t, schema(t, release.OutputSchema()), result))
	assert.False(t, result.RetryAllowed)
	assert.Equal(t, "ticket-9001", *result.ResourceID)

	approval, err := f.family.Approve(alice, stored)
	require.NoError(t, err)
	assert.Equal(t, "ticket-9001", approval.TicketID)
	require.NoError(t, validate(t, schema(t, release.ApproveOutputSchema()), approval))
}

func TestSameKeyChangedTargetIsIdempotencyConflict(t *testing.T) {
	f := newFixture(t, 0)
	first, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)

	replay, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	assert.True(t, replay.Replayed, "the same key with the same arguments returns the first operation")
	assert.Equal(t, first.Operation.Handle, replay.Operation.Handle)

	for name, changed := range map[string][]byte{
		"commit":      args("payments-api", "9f00aa1", "production-eu", "deploy-ticket-payments-8bc911d"),
		"environment": args("payments-api", "8bc911d", "staging-eu", "deploy-ticket-payments-8bc911d"),
		"service":     args("payments-worker", "8bc911d", "production-eu", "deploy-ticket-payments-8bc911d"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.submit(t, alice, changed)
			fail := requireFailure(t, err, tools.CodeIdempotencyConflict)
			assert.False(t, fail.RetryAllowed)
		})
	}
	assert.Equal(t, 1, f.sim.Stats().CreateCalls, "a conflict never reaches the provider")
	assert.Equal(t, 1, f.sim.Stats().TicketsCommitted)
}

func TestRetryUsesNewOperationIDIsDeduplicated(t *testing.T) {
	f := newFixture(t, 0)
	first, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)

	again, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-payments-RETRY"))
	require.NoError(t, err)
	assert.True(t, again.Deduplicated)
	assert.Equal(t, first.Operation.Handle, again.Operation.Handle, "the existing operation is returned")
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)

	result := release.NewResult(alice, again)
	require.NoError(t, validate(t, schema(t, release.OutputSchema()), result))
	assert.True(t, result.Deduplicated)
	assert.Equal(t, "deploy-ticket-payments-8bc911d", *result.OperationID, "same client: its own original key")

	// Another client's holder key is never revealed; the handle is.
	other := alice
	other.ClientID = "other-agent"
	foreign := release.NewResult(other, again)
	assert.Nil(t, foreign.OperationID)
	assert.Equal(t, map[string]string{"handle": first.Operation.Handle}, foreign.NextAction.Arguments)
}

// The lost-response case: the provider commits and drops the response;
// the agent retries with a fresh operation_id. No second ticket.
func TestTimeoutAfterCommitThenNewOperationIDCreatesNoSecondTicket(t *testing.T) {
	f := newFixture(t, 0)
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}}})

	first, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	assert.Equal(t, operation.StateUnknown, first.Operation.State)
	assert.Equal(t, operation.OutcomeResponseMissing, first.Operation.Outcome)
	assert.Empty(t, first.Operation.Receipt)

	again, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-payments-RETRY"))
	require.NoError(t, err)
	assert.True(t, again.Deduplicated)
	assert.Equal(t, operation.StateUnknown, again.Operation.State)
	result := release.NewResult(alice, again)
	assert.Equal(t, packet.ToolGetOperation, result.NextAction.Tool)
	assert.False(t, result.RetryAllowed)

	_, err = f.family.Approve(alice, again.Operation)
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "reconciliation must prove it first")

	stats := f.sim.Stats()
	assert.Equal(t, 1, stats.CreateCalls)
	assert.Equal(t, 1, stats.TicketsCommitted)
}

func TestUnconfirmedCreateIsUnknownNotSucceeded(t *testing.T) {
	f := newFixture(t, 0)
	api := flakyAPI{ReleaseAPI: f.client, getErr: map[string]error{
		"ticket-9001": &provider.Error{Class: provider.ClassUnknown, Op: provider.OpGetTicket, StatusCode: 503},
	}}
	family := release.New(api, grants, release.DefaultRecovery())
	sub, err := f.ex.Submit(context.Background(), family, alice, paymentsArgs, "")
	require.NoError(t, err)
	assert.Equal(t, operation.StateUnknown, sub.Operation.State)
	assert.Equal(t, operation.OutcomeVerificationInconclusive, sub.Operation.Outcome)
	assert.Equal(t, "ticket-9001", sub.Operation.ResourceID, "the reported id is kept as a lead for the reconciler")
	assert.Empty(t, sub.Operation.Receipt, "no receipt without verification")
	// The first probe waits the settle window from the latest moment the
	// dispatch wait can have ended (dispatch + downstream budget), and from
	// the commit deadline the provider promised to honour (the lease end).
	settled := sub.Operation.LastDispatchAt.Add(f.ex.Budget().Downstream + family.Recovery().SettleWindow)
	assert.Equal(t, sub.Operation.DispatchDeadline().Add(family.Recovery().SettleWindow), sub.Operation.DueAt)
	assert.True(t, sub.Operation.DueAt.After(settled))
}

func TestForbiddenCallersStoreAndSendNothing(t *testing.T) {
	f := newFixture(t, 0)
	viewer := alice
	viewer.Roles = []string{"viewer"}
	for _, tc := range []struct {
		name   string
		caller tools.Caller
		args   []byte
	}{
		{"deployer naming another team's service", alice, args("billing-api", "8bc911d", "production-eu", "deploy-ticket-billing-1")},
		{"deployer naming an ungranted service", alice, args("unknown-svc", "8bc911d", "production-eu", "deploy-ticket-unknown-1")},
		{"caller without the deployer role", viewer, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-viewer-1")},
		{"deployer without a team", tools.Caller{ClientID: "c", UserID: "u", Roles: []string{policy.RoleDeployer}}, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-noteam-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.submit(t, tc.caller, tc.args)
			fail := requireFailure(t, err, tools.CodeForbidden)
			assert.False(t, fail.RetryAllowed)

			var a release.Args
			require.NoError(t, decode(tc.args, &a))
			_, err = f.st.Get(context.Background(), handleOf(t, tc.caller, a.OperationID))
			assert.True(t, errors.Is(err, store.ErrNotFound), "nothing may be stored for a forbidden call: %v", err)
		})
	}
	stats := f.sim.Stats()
	assert.Zero(t, stats.CreateCalls)
	assert.Zero(t, stats.SearchCalls+stats.GetCalls)
}

func TestProvenRejectionFailsAndFreesTheBusinessKey(t *testing.T) {
	f := newFixture(t, 0)
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateReject, Times: 1}}})
	first, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, first.Operation.State)
	_, err = f.family.Approve(alice, first.Operation)
	requireFailure(t, err, tools.CodePreconditionFailed)

	// A new intent (new key) may now create the ticket.
	second, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-payments-2nd"))
	require.NoError(t, err)
	assert.False(t, second.Deduplicated)
	assert.Equal(t, operation.StateSucceeded, second.Operation.State)
	assert.Equal(t, 1, f.sim.Stats().TicketsCommitted)
}
