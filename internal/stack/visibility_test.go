package stack_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// rawAnswer is everything a caller observes of a tool result.
func rawAnswer(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err)
	data, err := json.Marshal(res)
	require.NoError(t, err)
	return string(data)
}

func TestTokenWithTheSameSubAtAnotherMerchantReadsNoPacket(t *testing.T) {
	h := startStack(t, 1, nil)
	alice := connect(t, h.MCPURLs[0], h.token(t, "ALICE"), protocolNew)
	created, isErr := call(t, alice, riskreview.ToolRequest, reviewArgs("O20260728001", "chargeback pattern", "op-visibility-0001"))
	require.False(t, isErr, created)
	reviewID := created["review_id"].(string)

	impostor := persona("ALICE")
	impostor.Merchant = "M2" // same sub, another merchant
	tok, err := h.Token(impostor, time.Hour)
	require.NoError(t, err)
	other := connect(t, h.MCPURLs[0], tok, protocolNew)
	unknown := "op_" + "aaaaaaaaaaaaaaaaaaaaaaaaaa"

	for _, tc := range []struct {
		tool             string
		foreign, missing map[string]any
	}{
		{packet.ToolGetOperation, map[string]any{"handle": reviewID}, map[string]any{"handle": unknown}},
		{packet.ToolGetOperation, map[string]any{"operation_id": "op-visibility-0001"}, map[string]any{"operation_id": "op-visibility-0404"}},
		{riskreview.ToolStatus, map[string]any{"review_id": reviewID}, map[string]any{"review_id": unknown}},
	} {
		foreign := rawAnswer(t, other, tc.tool, tc.foreign)
		assert.Contains(t, foreign, `"NOT_FOUND"`, tc.tool)
		assert.NotContains(t, foreign, "O20260728001", "nothing of M1's review leaks")
		assert.Equal(t, rawAnswer(t, other, tc.tool, tc.missing), foreign, "%s: not visible reads exactly like not existing", tc.tool)
	}

	own, isErr := call(t, alice, packet.ToolGetOperation, map[string]any{"handle": reviewID})
	require.False(t, isErr, own)
	assert.Equal(t, "O20260728001", own["target"].(map[string]any)["order_id"])
}

func TestTicketOfAnotherTeamIsInvisibleToTheSameSubWithoutTheGrant(t *testing.T) {
	r := newTicketRig(t)
	created, isErr := call(t, r.deployer, release.ToolCreate, ticketArgs("8bc911d", "deploy-op-visibility-1"))
	require.False(t, isErr, created)
	handle := created["ticket_handle"].(string)

	impostor := persona("DEPLOYER")
	impostor.Merchant = "team-search" // same sub, a team not granted payments-api
	tok, err := r.Token(impostor, time.Hour)
	require.NoError(t, err)
	other := connect(t, r.MCPURLs[0], tok, protocolOld)
	unknown := "op_" + "bbbbbbbbbbbbbbbbbbbbbbbbbb"

	for _, tc := range []struct {
		tool, arg string
	}{{packet.ToolGetOperation, "handle"}, {release.ToolApprove, "ticket_handle"}, {packet.ToolResolveOperation, "handle"}} {
		args := func(h string) map[string]any {
			m := map[string]any{tc.arg: h}
			if tc.tool == packet.ToolResolveOperation {
				m["resolution"], m["evidence"] = "FAILED", "x"
			}
			return m
		}
		foreign := rawAnswer(t, other, tc.tool, args(handle))
		assert.Contains(t, foreign, `"NOT_FOUND"`, tc.tool)
		assert.Equal(t, rawAnswer(t, other, tc.tool, args(unknown)), foreign, "%s: not visible reads exactly like not existing", tc.tool)
	}
	approval, isErr := r.approve(t, "deploy-op-visibility-1")
	require.False(t, isErr, approval)
}
