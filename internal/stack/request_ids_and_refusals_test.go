package stack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A 2025-11-25 task-augmented tools/call of a read tool is refused with
// -32601 and a message telling the client to call it without "task". The
// SDK rewrites every handler error whose code is -32601 into its own
// `method not found: "<method>"`, which would tell the client that
// tools/call itself does not exist here.
func TestAnOlderClientsTaskOnAReadToolIsRefusedWithAMessageThatSaysWhy(t *testing.T) {
	h := startStack(t, 1, nil)
	tok := h.token(t, "ALICE")
	r := rpcV1(t, h.MCPURLs[0], tok, "tools/call", map[string]any{
		"name": "get_operation", "task": map[string]any{},
		"arguments": map[string]any{"handle": "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"}})
	require.NotNil(t, r.Error, "a read tool refuses task")
	assert.Equal(t, int64(-32601), r.Error.Code)
	assert.NotEqual(t, `method not found: "tools/call"`, r.Error.Message,
		"the refusal says tools/call does not exist, instead of telling the client to call the tool without task")
	assert.Contains(t, r.Error.Message, "task")
}

// MCP request ids "MUST" be a string or an integer. The SDK truncates a
// fractional id, so the call would run (a write included) and its answer
// carry another id than the request's, which the client cannot match: it
// is refused as an invalid request before anything runs.
func TestAFractionalRequestIDIsRefusedBeforeAnythingRuns(t *testing.T) {
	h := startStack(t, 1, nil)
	tok := h.token(t, "ALICE")
	body := `{"jsonrpc":"2.0","id":2.5,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O20260728004","reason":"fractional id","operation_id":"op-fraction-1"}}}`
	req, err := http.NewRequest(http.MethodPost, h.MCPURLs[0], strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var reply struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(data, &reply), "%s", data)
	if reply.Error != nil && reply.Error.Code == -32600 {
		return // refused as an invalid request: fine
	}
	assert.Equal(t, "2.5", string(reply.ID), "answer to request id 2.5 (HTTP %d): %s", resp.StatusCode, data)
	assert.Equal(t, 0, h.Risk.Stats().CreateCalls, "a request with an invalid id was executed")
}

// A 2025-11-25 tools/call whose "task" is not a TaskMetadata object is
// refused -32602 whatever the tool: the boundary's refusal of a task on a
// tool without task support (-32601) comes after that check, as in the
// tasks middleware.
func TestAMalformedTaskIsInvalidParamsOnEveryTool(t *testing.T) {
	h := startStack(t, 1, nil)
	tok := h.token(t, "ALICE")
	r := rpcV1(t, h.MCPURLs[0], tok, "tools/call", map[string]any{
		"name": "get_operation", "task": 5,
		"arguments": map[string]any{"handle": "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"}})
	require.NotNil(t, r.Error)
	assert.Equal(t, int64(-32602), r.Error.Code, "%s", r.Error.Message)
}
