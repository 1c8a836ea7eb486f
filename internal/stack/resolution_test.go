package stack_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/releaseapi"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// incidentRig escalates one ticket operation as an incident: the provider
// holds ticket-9001 and ticket-9002 for the same target.
func incidentRig(t *testing.T, opID string) (ticketRig, string) {
	t.Helper()
	r := newTicketRig(t)
	r.setFaults(t, releaseapi.Faults{Create: []releaseapi.CreateFault{{Mode: releaseapi.CreateDuplicateThenDrop, Times: 1}}})
	created, _ := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", opID))
	r.clock.Advance(time.Minute)
	r.sweep(t)
	require.Equal(t, "ESCALATED", r.packet(t, opID)["state"])
	return r, created["ticket_handle"].(string)
}

func TestOperatorCannotSettleAnIncidentOnATicketThatDoesNotExist(t *testing.T) {
	r, handle := incidentRig(t, "deploy-op-phantom-1")
	operator := connect(t, r.MCPURLs[0], r.token(t, "OPERATOR"), protocolOld)

	for _, phantom := range []string{"ticket-424242", "ticket-9003"} {
		res, isErr := call(t, operator, packet.ToolResolveOperation, map[string]any{"handle": handle, "resolution": "SUCCEEDED",
			"evidence": "kept " + phantom, "resource_id": phantom})
		assert.True(t, isErr, "a resource the provider does not confirm is refused: %v", res)
		assert.Equal(t, "PRECONDITION_FAILED", res["code"])
	}
	assert.Equal(t, "ESCALATED", r.packet(t, "deploy-op-phantom-1")["state"], "refusals change nothing")
	approval, isErr := r.approve(t, "deploy-op-phantom-1")
	assert.True(t, isErr, "still blocked: %v", approval)

	require.True(t, r.Release.RemoveTicket("ticket-9002"))
	settled, isErr := call(t, operator, packet.ToolResolveOperation, map[string]any{"handle": handle, "resolution": "SUCCEEDED",
		"evidence": "kept ticket-9001, cancelled ticket-9002", "resource_id": "ticket-9001"})
	require.False(t, isErr, settled)
	assert.Equal(t, "ticket-9001", settled["resource_id"], "one of the matches is accepted")
}

func TestTheOperatorWhoResolvedCannotApproveTheRollout(t *testing.T) {
	r, handle := incidentRig(t, "deploy-op-four-eyes-1")
	operator := connect(t, r.MCPURLs[0], r.token(t, "OPERATOR"), protocolOld)
	require.True(t, r.Release.RemoveTicket("ticket-9002"))
	settled, isErr := call(t, operator, packet.ToolResolveOperation, map[string]any{"handle": handle, "resolution": "SUCCEEDED",
		"evidence": "kept ticket-9001, cancelled ticket-9002", "resource_id": "ticket-9001"})
	require.False(t, isErr, settled)

	res, isErr := call(t, operator, release.ToolApprove, map[string]any{"ticket_handle": handle})
	assert.True(t, isErr, "the resolver may not approve what it resolved: %v", res)
	assert.Equal(t, "FORBIDDEN", res["code"])

	approval, isErr := r.approve(t, "deploy-op-four-eyes-1")
	require.False(t, isErr, approval)
	assert.Equal(t, "approved", approval["decision"], "another principal may")
}

func TestOperatorCannotFailAnIncidentWhoseTicketsStillExist(t *testing.T) {
	r, handle := incidentRig(t, "deploy-op-still-there-1")
	operator := connect(t, r.MCPURLs[0], r.token(t, "OPERATOR"), protocolOld)

	res, isErr := call(t, operator, packet.ToolResolveOperation, map[string]any{"handle": handle, "resolution": "FAILED",
		"evidence": "both cancelled", "effects_removed": true})
	assert.True(t, isErr, "the search still finds both tickets: %v", res)
	assert.Equal(t, "PRECONDITION_FAILED", res["code"])
	dedup, _ := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-still-there-2"))
	assert.Equal(t, true, dedup["deduplicated"], "the target stays held: no third ticket")
	assert.Equal(t, 2, r.Release.Stats().TicketsCommitted, "still the two tickets of the incident; no third")
}
