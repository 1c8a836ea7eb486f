package stack_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// A late commit, end to end through MCP with the reconciler's
// sweep on the shared clock: the create reaches the Release API, our wait
// ends (UNKNOWN), and the provider commits the first request later. The
// sweep runs every 10 s of clock time, as a schedule would.
func (r ticketRig) sweepEvery(t *testing.T, step time.Duration, n int) {
	t.Helper()
	for range n {
		r.clock.Advance(step)
		r.sweep(t)
	}
}

// Within the provider's promise (it commits by the deadline sent with the
// create): absence is never proven before that deadline is indexed, so the
// late ticket is found and there is exactly one.
func TestLateCommitAfterTheWaitEndedIsFoundAndNeverDuplicated(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateCommitLateWithinDeadline, Times: 1}}})
	res, isErr := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-late-commit-1"))
	require.True(t, isErr)
	// UNKNOWN; PENDING only when a loaded store could not record the
	// outcome in its budget (the lease then expires to UNKNOWN).
	require.Contains(t, []any{"UNKNOWN", "PENDING"}, res["status"], res)

	r.sweepEvery(t, 10*time.Second, 12)

	st := r.Release.Stats()
	assert.Equal(t, 1, st.TicketsByTarget["payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu"], "one intent, one ticket")
	assert.Equal(t, 1, st.CreateCalls, "the late ticket was found, nothing re-sent")
	p := r.packet(t, "deploy-late-commit-1")
	assert.Equal(t, "committed_and_verified", p["outcome"])
	_, isErr = r.approve(t, "deploy-late-commit-1")
	assert.False(t, isErr)
}

// Beyond the promise (the simulator commits after the deadline): the
// re-send happens, and the duplicate audit finds the second ticket. The
// operation becomes the incident and approve_rollout is refused instead of
// approving one of two tickets.
func TestLateCommitBeyondTheDeadlineBecomesAnIncidentAndBlocksApproval(t *testing.T) {
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{
		Create:              []releaseapi.CreateFault{{Mode: releaseapi.CreateCommitLateBeyondDeadline, Times: 1}},
		LateCommitOverrunMS: 10_000,
	})
	res, isErr := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-late-commit-2"))
	require.True(t, isErr)
	// UNKNOWN; PENDING only when a loaded store could not record the
	// outcome in its budget (the lease then expires to UNKNOWN).
	require.Contains(t, []any{"UNKNOWN", "PENDING"}, res["status"], res)

	r.sweepEvery(t, 10*time.Second, 12)

	require.Equal(t, 2, r.Release.Stats().TicketsByTarget["payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu"], "the provider broke its promise")
	p := r.packet(t, "deploy-late-commit-2")
	assert.Equal(t, "ESCALATED", p["state"])
	assert.Equal(t, "incident_multiple_effects", p["outcome"])
	assert.EqualValues(t, 2, p["duplicate_resources"])
	assert.Equal(t, true, p["dependent_actions_blocked"])
	refusal, isErr := r.approve(t, "deploy-late-commit-2")
	assert.True(t, isErr, "never approve one of two tickets: %v", refusal)
}
