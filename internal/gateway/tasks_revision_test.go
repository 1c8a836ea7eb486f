package gateway_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The revision a request is judged at must be the one the SDK serves it
// at. The SDK reads _meta's protocol version only when it is a string
// (ServerRequest.ProtocolVersion, validateRequestMeta, the streamable
// transport's header check); any other value names nothing and the
// session's version (the MCP-Protocol-Version header) applies. So a
// 2025-11-25 request with a non-string version in its _meta is judged at
// 2025-11-25: its malformed "task" is refused, and nothing is recorded or
// sent.
func TestANonStringProtocolVersionInMetaLeavesTheRequestAtItsSessionsRevision(t *testing.T) {
	w := newTaskWorld(t)
	p := refundCall("op-meta-num-0001", false)
	p["task"] = true // malformed at 2025-11-25: -32602, nothing recorded or sent
	p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": 20251125}
	header := http.Header{}
	header.Set("MCP-Protocol-Version", "2025-11-25")
	_, reply := w.postRPC(t, "tools/call", p, header)

	e, _ := reply["error"].(map[string]any)
	if assert.NotNil(t, e, "a 2025-11-25 call with a malformed task was served: %v", reply) {
		assert.Equal(t, float64(-32602), e["code"], "%v", e)
	}
	_, err := w.operation(t, "op-meta-num-0001")
	assert.Error(t, err, "nothing recorded")
	assert.Zero(t, w.refund.sent.Load(), "nothing sent")

	// A well-formed task request in the same shape is a 2025-11-25 task
	// request, answered with CreateTaskResult.
	p = refundCall("op-meta-num-0002", true)
	p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": 20251125}
	_, reply = w.postRPC(t, "tools/call", p, header)
	require.Nil(t, reply["error"], "%v", reply)
	res, _ := reply["result"].(map[string]any)
	assert.Contains(t, res, "task", "a 2025-11-25 task-augmented call answered plainly: %v", res)
}
