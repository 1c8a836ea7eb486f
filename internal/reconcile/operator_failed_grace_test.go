package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/policy"
	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
)

var olga = tools.Caller{ClientID: "ops-console", UserID: "op-olga", TenantID: "sre", Roles: []string{policy.RoleOperator}}

// An operator's FAILED releases the fact on the provider's promise that
// nothing the operation sent commits past its horizon, as a withdrawal
// does; a withdrawal is audited a grace past the horizon for a provider
// that breaks the promise by less. A FAILED given inside that grace was
// not: a re-send committing 10 s past its deadline landed after it, the
// next request made its own ticket, and no operation named the late one.
// FAILED now waits until the provider's search covers the horizon and the
// grace; by then the late ticket is there to be kept.
func TestAnOperatorsFailedResolutionWaitsUntilTheSearchCoversTheGrace(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	ctx := context.Background()
	op := f.escalateAfterAResendThatBreaksItsPromise(t, 10*time.Second)

	_, err := operatortools.Resolve(ctx, f.disp, f.fam, olga, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "provider search shows no ticket for the target"})

	var refusal *tools.Failure
	require.ErrorAs(t, err, &refusal, "a FAILED inside the grace releases the fact before a late commit can be seen")
	assert.Equal(t, tools.CodeTemporaryUnavailable, refusal.Code)
	assert.True(t, refusal.RetryAllowed)
	assert.Contains(t, refusal.Message, "resolve again after")
	assert.Equal(t, operation.StateEscalated, f.get(t, op.Handle).State, "nothing was recorded")

	f.base.Advance(f.disp.AuditCoverage(op).Sub(f.at(f.dispatcher)()) + 2*time.Second)
	_, err = operatortools.Resolve(ctx, f.disp, f.fam, olga, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "provider search shows no ticket for the target"})
	require.ErrorAs(t, err, &refusal, "the late commit has landed and is found")
	assert.Contains(t, refusal.Message, "still shows effects")
	require.Equal(t, 1, f.tickets())

	// The operator keeps it; the next request for the fact is answered
	// with it: one ticket.
	found, err := f.fam.Probe(ctx, op)
	require.NoError(t, err)
	require.Len(t, found.Matches, 1)
	ticket := found.Matches[0]
	kept, err := operatortools.Resolve(ctx, f.disp, f.fam, olga, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionSucceeded, Evidence: "provider shows exactly one ticket: " + ticket, ResourceID: ticket})
	require.NoError(t, err)
	require.Equal(t, operation.StateSucceeded, kept.State)
	next := f.submitAs(t, "deploy-payments-after-resolve", "")
	assert.Equal(t, kept.Handle, next.Handle, "deduplicated onto the kept ticket")
	assert.Equal(t, 1, f.tickets())
}

// A FAILED whose search covers the grace, with nothing found, is taken:
// the promise held.
func TestAnOperatorsFailedResolutionPastTheGraceReleasesTheFact(t *testing.T) {
	f := newReleaseFixture(t, releaseOptions{lag: time.Second, skew: 10 * time.Second})
	ctx := context.Background()
	op := f.escalateAfterAResendThatBreaksItsPromise(t, 0)
	f.base.Advance(f.disp.AuditCoverage(op).Sub(f.at(f.dispatcher)()) + 2*time.Second)

	failed, err := operatortools.Resolve(ctx, f.disp, f.fam, olga, op, operatortools.Resolution{
		Outcome: operatortools.ResolutionFailed, Evidence: "provider search shows no ticket for the target"})

	require.NoError(t, err)
	assert.Equal(t, operation.StateFailed, failed.State)
	assert.Equal(t, 0, f.tickets())
}

// escalateAfterAResendThatBreaksItsPromise: the first create times out
// before committing; the reconciler proves it absent and re-sends; the
// re-send times out too, held by the provider to commit overrun past its
// deadline (never, with overrun 0: a timeout before commit); the retry
// budget runs out and the operation is ESCALATED for the operator, with no
// ticket yet.
func (f releaseFixture) escalateAfterAResendThatBreaksItsPromise(t *testing.T, overrun time.Duration) operation.Operation {
	t.Helper()
	ctx := context.Background()
	op := f.submitWithFault(t, releaseapi.CreateTimeoutBeforeCommit, 0)
	require.Equal(t, operation.StateUnknown, op.State)
	mode := releaseapi.CreateCommitLateBeyondDeadline
	if overrun == 0 {
		mode = releaseapi.CreateTimeoutBeforeCommit
	}
	require.NoError(t, f.sim.SetFaults(releaseapi.Faults{
		Create: []releaseapi.CreateFault{{Mode: mode, Times: 1}}, LateCommitOverrunMS: int(overrun / time.Millisecond)}))
	for step := 0; op.State != operation.StateEscalated; step++ {
		require.Less(t, step, 40, "journal: %+v", op.Journal)
		if now := f.at(f.reconciler)(); op.DueAt.After(now) {
			f.base.Advance(op.DueAt.Sub(now))
		}
		_, err := f.recon.Reconcile(ctx, op)
		require.NoError(t, err)
		op = f.get(t, op.Handle)
	}
	require.Equal(t, 2, op.Attempts())
	require.Equal(t, 0, f.tickets(), "the re-send's commit, if any, is still held by the provider")
	return op
}
