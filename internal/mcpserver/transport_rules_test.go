package mcpserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Streamable HTTP 2026-07-28, Backward Compatibility: a server receiving
// older clients' traffic "SHOULD respond as follows: ... A Last-Event-ID
// header: ignore it; streams are not resumable." The SDK refused a POST
// carrying one with HTTP 400.
func TestALastEventIDHeaderIsIgnoredAt20260728(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	h, body := newProtocolRequest(1, "tools/list", "", nil)
	h.Set("Last-Event-ID", "stream-1/7")
	resp := post(t, testContext(t), srv.URL, h, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	msg := decodeMessages(t, resp)[0]
	require.Nil(t, msg.Error, "%s", resp.body)
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(msg.Result, &res))
	assert.Len(t, res.Tools, 1)
}

// 2025-06-18 and 2025-11-25, Protocol Version Header: "If the server
// receives a request with an invalid or unsupported MCP-Protocol-Version,
// it MUST respond with 400 Bad Request." The boundary answered a tools/call
// of an unknown tool itself, before the SDK looked at the version, with
// HTTP 200.
func TestAnUnsupportedProtocolVersionIsRefusedBeforeAnUnknownTool(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	ctx := testContext(t)
	h := http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}
	resp := post(t, ctx, srv.URL, h,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`)
	assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)

	// A later revision than any served is answered with the supported
	// ones (2026-07-28: UnsupportedProtocolVersionError, -32022), never
	// with a verdict on the tool, and nothing runs.
	for _, tool := range []string{"nope", "request_risk_review"} {
		h, body := newProtocolRequest(2, "tools/call", tool, map[string]any{"name": tool,
			"arguments": map[string]any{"order_id": orderID(2), "reason": "r"}})
		body = strings.ReplaceAll(body, version20260728, "2099-01-01")
		h.Set("MCP-Protocol-Version", "2099-01-01")
		resp = post(t, ctx, srv.URL, h, body)
		assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
		msg := decodeMessages(t, resp)[0]
		require.NotNil(t, msg.Error, "%s", resp.body)
		assert.Equal(t, int64(-32022), msg.Error.Code, "%s", resp.body)
	}
	assert.Empty(t, rec.snapshot())
}
