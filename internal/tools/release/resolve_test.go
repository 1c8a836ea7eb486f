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

// committedButUnproven: the create committed ticket-9001 but its answer was
// lost, and the reconciler gave up proving it: ESCALATED with no resource.
func committedButUnproven(t *testing.T, f fixture) operation.Operation {
	t.Helper()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDropResponseAfterCommit, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	require.Equal(t, operation.StateUnknown, sub.Operation.State)
	op, err := f.ex.Transition(context.Background(), release.ToolCreate, sub.Operation, operation.Event{
		Type: operation.EventProbeBudgetExhausted, At: f.clock.Now(), Source: "reconciler"}, nil)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, op.State)
	require.Empty(t, op.ResourceID)
	return op
}

func TestResolveSucceededNeedsTheProviderToConfirmTheNamedTicket(t *testing.T) {
	f := newFixture(t, 0)
	op := committedButUnproven(t, f)
	other, err := f.submit(t, alice, args("payments-api", "aaaaaaa", "production-eu", "deploy-ticket-other-commit"))
	require.NoError(t, err)
	require.Equal(t, "ticket-9002", other.Operation.ResourceID)

	for name, id := range map[string]string{"a ticket that does not exist": "ticket-424242", "a ticket for another target": "ticket-9002"} {
		t.Run(name, func(t *testing.T) {
			_, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "checked the queue", ResourceID: id})
			fail := requireFailure(t, err, tools.CodePreconditionFailed)
			assert.Contains(t, fail.Message, "does not confirm "+id)
		})
	}
	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateEscalated, stored.State, "no receipt on an operator's word alone")

	settled, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "found it in the queue", ResourceID: "ticket-9001"})
	require.NoError(t, err)
	assert.Equal(t, "ticket-9001", settled.ResourceID)
	assert.Equal(t, tools.Receipt(op.Handle, "ticket-9001"), settled.Receipt)
}

func TestResolveSucceededOnAnIncidentMustKeepOneOfTheMatches(t *testing.T) {
	f := newFixture(t, 0)
	op := escalated(t, f)                         // ticket-9001 and ticket-9002
	f.clock.Advance(untilCommitHorizon(t, f, op)) // a search that can rule out a third
	// Only a ticket the search, taken now, returns and the read confirms.
	_, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "kept 9003", ResourceID: "ticket-9003"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "does not confirm ticket-9003")

	require.True(t, f.sim.RemoveTicket("ticket-9001"))
	_, err = operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "kept 9001", ResourceID: "ticket-9001"})
	requireFailure(t, err, tools.CodePreconditionFailed)

	settled, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "kept 9002", ResourceID: "ticket-9002"})
	require.NoError(t, err)
	assert.Equal(t, "ticket-9002", settled.ResourceID)
}

func TestResolveIsNotRecordedWhenTheProviderCannotBeAsked(t *testing.T) {
	f := newFixture(t, 0)
	op := committedButUnproven(t, f)
	down := &provider.Error{Class: provider.ClassUnknown, StatusCode: 503, Code: "unavailable"}
	flaky := fixture{simEnv: f.simEnv, st: f.st, ex: f.ex,
		family: release.New(flakyAPI{ReleaseAPI: f.client, getErr: map[string]error{"ticket-9001": down}}, grants, f.family.Recovery())}

	_, err := operatortools.Resolve(context.Background(), flaky.ex, flaky.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "found it", ResourceID: "ticket-9001"})
	fail := requireFailure(t, err, tools.CodeTemporaryUnavailable)
	assert.True(t, fail.RetryAllowed)
	stored, err := f.st.Get(context.Background(), op.Handle)
	require.NoError(t, err)
	assert.Equal(t, operation.StateEscalated, stored.State)

	_, err = operatortools.Resolve(context.Background(), f.ex, nil, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionSucceeded, Evidence: "found it", ResourceID: "ticket-9001"})
	requireFailure(t, err, tools.CodePreconditionFailed)
}

func TestResolveFailedNeedsASearchShowingNoEffect(t *testing.T) {
	f := newFixture(t, 0)
	op := committedButUnproven(t, f) // ticket-9001 exists, nobody knows
	f.clock.Advance(f.family.Recovery().SettleWindow)

	_, err := operatortools.Resolve(context.Background(), f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "nothing in the queue"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "ticket-9001", "an unknown effect found by the search blocks FAILED")
	dedup, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-after-refusal"))
	require.NoError(t, err)
	assert.True(t, dedup.Deduplicated, "the target stays held: no second ticket")
	assert.Equal(t, 1, f.sim.Stats().CreateCalls)
}

func TestTheResolverCannotApproveTheRolloutItResolved(t *testing.T) {
	resolved := walk(t, operation.Event{Type: operation.EventProbeMultiple, Duplicates: 2},
		operation.Event{Type: operation.EventOperatorSucceeded, Actor: operator.UserID, Source: operatortools.SourceOperator,
			ResourceID: "ticket-9001", Receipt: "receipt-1"})
	require.Equal(t, operation.StateSucceeded, resolved.State)

	_, err := approver.Approve(operator, resolved)
	fail := requireFailure(t, err, tools.CodeForbidden)
	assert.Contains(t, fail.Message, "another principal")
	sameSubOtherTenant := operator
	sameSubOtherTenant.TenantID = "team-payments"
	_, err = approver.Approve(sameSubOtherTenant, resolved)
	requireFailure(t, err, tools.CodeForbidden)

	secondOperator := tools.Caller{ClientID: "ops-console", UserID: "op-paul", TenantID: "sre", Roles: operator.Roles}
	ok, err := approver.Approve(secondOperator, resolved)
	require.NoError(t, err)
	assert.Equal(t, "approved", ok.Decision)
	ok, err = approver.Approve(alice, resolved)
	require.NoError(t, err)
	assert.Equal(t, "ticket-9001", ok.TicketID)
}

// Without a commit deadline the Release API may commit a held create at any
// time: the reconciler escalates its authoritative "no ticket" (resend
// unsafe) for that reason, and an operator's FAILED on the same search
// would release the target while the held create can still commit. FAILED
// then needs the operator's own statement that no request of the operation
// can still commit; it is journalled.
func TestResolveFailedNeedsLateCommitsRuledOutWhenTheProviderPromisesNoDeadline(t *testing.T) {
	f := newFixture(t, 0)
	rec := f.family.Recovery()
	rec.CommitDeadline = false // INTENTGATE_RELEASE_COMMIT_DEADLINE=false
	f.family = release.New(f.client, grants, rec)
	ctx := context.Background()
	f.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateTimeoutBeforeCommit, Times: 1}}})
	sub, err := f.submit(t, alice, paymentsArgs)
	require.NoError(t, err)
	op := sub.Operation
	require.Equal(t, operation.StateUnknown, op.State)
	f.clock.Advance(rec.SettleWindow + 5*time.Second)
	found, err := f.family.Probe(ctx, op)
	require.NoError(t, err)
	require.True(t, found.Authoritative)
	require.False(t, found.LateCommitsBounded, "what the reconciler escalates as resend_unsafe")
	op, err = f.ex.Transition(ctx, release.ToolCreate, op, operation.Event{Type: operation.EventResendUnsafe,
		At: f.clock.Now(), Source: "reconciler", Detail: "late commits unbounded"}, nil)
	require.NoError(t, err)

	_, err = operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed, Evidence: "search shows nothing"})
	fail := requireFailure(t, err, tools.CodePreconditionFailed)
	assert.Contains(t, fail.Message, "late_commits_ruled_out")
	stored, err := f.st.Get(ctx, op.Handle)
	require.NoError(t, err)
	require.Equal(t, operation.StateEscalated, stored.State, "the target stays held")
	dedup, err := f.submit(t, alice, args("payments-api", "8bc911d", "production-eu", "deploy-ticket-while-held"))
	require.NoError(t, err)
	assert.True(t, dedup.Deduplicated, "no second create while the first may still commit")

	evidence := "release team confirmed the held create was dropped"
	settled, err := operatortools.Resolve(ctx, f.ex, f.family, operator, op, operatortools.Resolution{Outcome: operatortools.ResolutionFailed,
		Evidence: evidence, LateCommitsRuledOut: true})
	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, settled.State)
	assert.Equal(t, evidence+"\n"+operatortools.LateCommitsRuledOutStatement, settled.Journal[len(settled.Journal)-1].Detail,
		"the operator's statement is journalled")
}
