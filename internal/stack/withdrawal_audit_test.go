package stack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// End to end through MCP, the table and the reconciler's scheduled sweep:
// the owner withdraws a ticket proven absent past the provider's promised
// horizon (tasks/cancel), the provider commits it late all the same, and
// the fact, released, is asked for again and gets its own ticket. The
// withdrawal's audit, found by the sweep in the due index, reports the
// late ticket on the withdrawn operation: its task stays cancelled and
// says an operator must look, and so does get_operation.
func TestAWithdrawnTicketTheProviderCommitsLateIsReportedNotSilentlyDuplicated(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 1, taskKeyEnv, stack.Config{Clock: clock.Now, ReleaseSearchLag: searchLag})
	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	r := ticketRig{harness: h, clock: clock, reconciler: svc, deployer: connect(t, h.MCPURLs[0], h.token(t, "DEPLOYER"), protocolNew)}
	tok := h.token(t, "DEPLOYER")
	r.setFaults(t, releaseapi.Faults{
		Create:              []releaseapi.CreateFault{{Mode: releaseapi.CreateCommitLateBeyondDeadline, Times: 1}},
		LateCommitOverrunMS: 10_000,
	})
	task := decodeTask(t, rpc(t, h.MCPURLs[0], tok, "tools/call", release.ToolCreate,
		map[string]any{"name": release.ToolCreate, "arguments": ticketArgs("8bc911d", "deploy-withdrawn-1")}, true))
	require.Equal(t, "working", task.Status)

	// Sweep a second at a time until the probe proves absence, and
	// withdraw before the reconciler claims the re-send.
	for step := 0; ; step++ {
		require.Less(t, step, 120, "the probe never proved absence: %s", task.StatusMessage)
		clock.Advance(time.Second)
		r.sweep(t)
		task = decodeTask(t, getTask(t, h.MCPURLs[0], tok, task.TaskID))
		if strings.HasPrefix(task.StatusMessage, "RETRYABLE") {
			break
		}
	}
	decision := cancelDecision(t, rpc(t, h.MCPURLs[0], tok, "tasks/cancel", task.TaskID, map[string]any{"taskId": task.TaskID}, true))
	require.Equal(t, true, decision["withdrawn"], "%v", decision)
	target := "payments-api/8bc911d0a3c4e5f60718293a4b5c6d7e8f901234/production-eu"
	require.Equal(t, 0, h.Release.Stats().TicketsByTarget[target], "the late commit has not landed yet")

	again, isErr := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-withdrawn-2"))
	require.False(t, isErr, "%v", again)
	require.Equal(t, "SUCCEEDED", again["status"], "the released fact is asked for again: %v", again)

	r.sweepEvery(t, 10*time.Second, 12)

	require.Equal(t, 2, h.Release.Stats().TicketsByTarget[target], "the provider broke its promise")
	cancelled := decodeTask(t, getTask(t, h.MCPURLs[0], tok, task.TaskID))
	assert.Equal(t, "cancelled", cancelled.Status, "a terminal status stays")
	assert.Contains(t, cancelled.StatusMessage, "the provider later reported an effect")
	assert.Contains(t, cancelled.StatusMessage, "an operator must look")
	p, isErr := call(t, r.deployer, packet.ToolGetOperation, map[string]any{"operation_id": "deploy-withdrawn-1"})
	require.False(t, isErr, "%v", p)
	assert.Equal(t, "FAILED", p["state"])
	assert.Equal(t, "verification_inconclusive", p["outcome"], "an effect exists: failed_without_effect no longer holds")
	next, _ := p["next_action"].(map[string]any)
	hint, _ := next["hint"].(string)
	assert.Contains(t, hint, "the provider later reported an effect (ticket-", "%v", p)
	ticket, _ := again["resource_id"].(string)
	require.NotEmpty(t, ticket, "%v", again)
	assert.NotContains(t, hint, ticket, "the next request's ticket is its own")
}
