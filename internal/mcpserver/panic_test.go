package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type panicParams struct {
	mcp.ParamsBase
}

// The SDK runs method handlers on a goroutine of its own and recovers
// nothing: a panic in any method (an extension's included) would end the
// process and every request in flight. The server answers it -32603 and
// serves the next request.
func TestAMethodHandlerThatPanicsIsAnsweredAndTheServerServesOn(t *testing.T) {
	rec := &recorder{}
	h, err := New(Config{Name: "intentgate-test", Version: "0.0.1", ErrorCodes: testCodes,
		Extensions: []Extension{{ID: "io.github.intentgate/test-panic", Install: func(s *mcp.Server) error {
			return mcp.AddReceivingCustomMethod(s, "test/panic", func(context.Context, *mcp.ServerSession, *panicParams) (mcp.Result, error) {
				var p *panicParams
				_ = p.Meta // a nil dereference, as a handler's bug would
				return nil, nil
			})
		}}}}, reviewTool(rec))
	require.NoError(t, err)
	srv := newLoopbackServer(t, h)
	ctx := testContext(t)

	header, body := newProtocolRequest(1, "test/panic", "", nil)
	msgs := decodeMessages(t, post(t, ctx, srv.URL, header, body))
	require.Len(t, msgs, 1)
	require.NotNil(t, msgs[0].Error, "%+v", msgs[0])
	assert.Equal(t, int64(-32603), msgs[0].Error.Code)
	assert.Contains(t, msgs[0].Error.Message, "test/panic")

	header, body = newProtocolRequest(2, "tools/call", "request_risk_review", map[string]any{
		"name": "request_risk_review", "arguments": map[string]any{"order_id": "O20260728001", "reason": "after a panic"}})
	msgs = decodeMessages(t, post(t, ctx, srv.URL, header, body))
	require.Len(t, msgs, 1)
	assert.Nil(t, msgs[0].Error, "the server serves on")
	assert.Len(t, rec.snapshot(), 1)
}
