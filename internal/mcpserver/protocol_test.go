package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests speak raw JSON-RPC over HTTP, to pin what the wire looks like
// for clients that are not the go-sdk.

func TestMalformedBodiesAreJSONRPCErrors(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	cases := []struct {
		name string
		body string
		code int64
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,"method":`, jsonrpc.CodeParseError},
		{"JSON but not JSON-RPC", `{"hello":"world"}`, jsonrpc.CodeInvalidRequest},
		{"wrong version tag", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, jsonrpc.CodeInvalidRequest},
	}
	for _, v := range []string{version20260728, version20250618} {
		for _, tc := range cases {
			t.Run(v+"/"+tc.name, func(t *testing.T) {
				resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {v}}, tc.body)
				assert.Equal(t, http.StatusBadRequest, resp.status)
				assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
				msgs := decodeMessages(t, resp)
				require.Len(t, msgs, 1)
				require.NotNil(t, msgs[0].Error, "%s", resp.body)
				assert.Equal(t, tc.code, msgs[0].Error.Code)
				assert.Nil(t, msgs[0].ID)
			})
		}
	}
}

func TestUnknownMethodIsJSONRPCMethodNotFound(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	t.Run("2026-07-28 (the SDK answers 404 with a JSON-RPC error)", func(t *testing.T) {
		h, body := newProtocolRequest(5, "no/such_method", "", nil)
		resp := post(t, testContext(t), srv.URL, h, body)
		assert.Equal(t, http.StatusNotFound, resp.status)
		msgs := decodeMessages(t, resp)
		require.NotNil(t, msgs[0].Error)
		assert.Equal(t, int64(jsonrpc.CodeMethodNotFound), msgs[0].Error.Code)
		assert.EqualValues(t, 5, msgs[0].ID)
	})
	t.Run("2025-06-18 (the SDK's plain-text 400 is rewritten)", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":"abc","method":"no/such_method","params":{}}`
		resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)
		assert.Equal(t, http.StatusBadRequest, resp.status)
		assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
		msgs := decodeMessages(t, resp)
		require.NotNil(t, msgs[0].Error, "%s", resp.body)
		assert.Equal(t, int64(jsonrpc.CodeMethodNotFound), msgs[0].Error.Code)
		assert.Contains(t, msgs[0].Error.Message, `"no/such_method"`)
		assert.Equal(t, "abc", msgs[0].ID)
	})
}

func TestUnknownToolOverRawNewProtocolIs400WithJSONRPCError(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	h, body := newProtocolRequest(9, "tools/call", "nope", map[string]any{"name": "nope", "arguments": map[string]any{}})
	resp := post(t, testContext(t), srv.URL, h, body)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), msgs[0].Error.Code)
}

func TestUnknownToolOverRawOldProtocolIsJSONRPCErrorIn200(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{}}}`
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20251125}}, body)
	assert.Equal(t, http.StatusOK, resp.status)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Equal(t, int64(jsonrpc.CodeInvalidParams), msgs[0].Error.Code)
	assert.EqualValues(t, 2, msgs[0].ID)
}

func TestRawNewProtocolCallNeedsNoInitializeAndNoSession(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	h, body := newProtocolRequest(1, "tools/call", "request_risk_review", map[string]any{
		"name":      "request_risk_review",
		"arguments": map[string]any{"order_id": orderID(3), "reason": "r"},
	})
	h.Set(HeaderIdempotencyKey, "raw-key")
	resp := post(t, testContext(t), srv.URL, h, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	assert.Empty(t, resp.header.Get("Mcp-Session-Id"))
	assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
	msgs := decodeMessages(t, resp)
	require.Nil(t, msgs[0].Error)
	var res struct {
		StructuredContent map[string]any `json:"structuredContent"`
		Meta              map[string]any `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Result, &res))
	assert.Equal(t, "raw-key", res.StructuredContent["idempotency_key"])
	assert.Contains(t, res.Meta, mcp.MetaKeyServerInfo, "2026-07-28 results name the server in _meta")
	calls := rec.snapshot()
	require.Len(t, calls, 1)
	assert.Equal(t, "1", calls[0].JSONRPCID)
	assert.Equal(t, version20260728, calls[0].ProtocolVersion)
}

func TestNewProtocolRequestWithoutMethodHeaderIsRejected(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	h, body := newProtocolRequest(1, "tools/list", "", nil)
	h.Del("Mcp-Method")
	resp := post(t, testContext(t), srv.URL, h, body)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Equal(t, int64(mcp.CodeHeaderMismatch), msgs[0].Error.Code)
}

func TestServerDiscoverAnswersVersionsCapabilitiesAndInstructions(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	h, body := newProtocolRequest(2, "server/discover", "", nil)
	resp := post(t, testContext(t), srv.URL, h, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	msgs := decodeMessages(t, resp)
	require.Nil(t, msgs[0].Error)
	var res struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      map[string]any  `json:"capabilities"`
		Instructions      string          `json:"instructions"`
		Meta              json.RawMessage `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Result, &res))
	assert.Equal(t, []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, res.SupportedVersions)
	assert.Equal(t, map[string]any{"tools": map[string]any{}}, res.Capabilities)
	assert.Equal(t, "test instructions", res.Instructions)
	assert.Contains(t, string(res.Meta), `"name":"intentgate-test"`)
}

func TestServerDiscoverIsMethodNotFoundForOldProtocol(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20251125}}, body)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error, "%s", resp.body)
	assert.Equal(t, int64(jsonrpc.CodeMethodNotFound), msgs[0].Error.Code)
}

func TestSubscriptionsListenIsAnsweredAtOnce(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	// Ask for everything; the server offers no list-changed notifications,
	// so the SDK acknowledges an empty subscription and completes the call.
	// If it ever held the stream open, post would block until the test
	// context's deadline and fail.
	h, body := newProtocolRequest(4, "subscriptions/listen", "", map[string]any{
		"notifications": map[string]any{"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true},
	})
	resp := post(t, testContext(t), srv.URL, h, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	// listen is always answered as SSE, even with JSONResponse.
	assert.Equal(t, "text/event-stream", resp.header.Get("Content-Type"))
	msgs := decodeMessages(t, resp)
	require.Len(t, msgs, 2, "%s", resp.body)
	assert.Equal(t, "notifications/subscriptions/acknowledged", msgs[0].Method)
	assert.JSONEq(t, `{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":4}}`, string(msgs[0].Params))
	assert.EqualValues(t, 4, msgs[1].ID)
	assert.Nil(t, msgs[1].Error)
}

func TestGetIsMethodNotAllowed(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))
}

func TestParamHeadersAreCheckedAgainstArguments(t *testing.T) {
	// A tool may bind an argument to an Mcp-Param-* header with the
	// x-mcp-header schema keyword (2026-07-28). The SDK then requires the
	// header on every 2026-07-28 call and rejects a mismatch before the tool
	// runs.
	tool := reviewTool(&recorder{})
	tool.InputSchema = json.RawMessage(`{
	  "type": "object", "additionalProperties": false,
	  "properties": {
	    "order_id": {"type": "string", "pattern": "^O[0-9]{11}$", "x-mcp-header": "OrderId"},
	    "reason": {"type": "string", "maxLength": 500}
	  },
	  "required": ["order_id", "reason"]
	}`)
	srv := startServer(t, tool)
	args := map[string]any{"name": "request_risk_review", "arguments": map[string]any{"order_id": orderID(1), "reason": "r"}}

	t.Run("go-sdk client that listed tools sends the header", func(t *testing.T) {
		ctx := testContext(t)
		cs := connect(t, ctx, srv.URL, version20260728)
		_, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_risk_review", Arguments: args["arguments"]})
		require.NoError(t, err)
		assert.False(t, res.IsError)
	})
	t.Run("go-sdk client that did not list tools is rejected", func(t *testing.T) {
		ctx := testContext(t)
		cs := connect(t, ctx, srv.URL, version20260728)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_risk_review", Arguments: args["arguments"]})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "missing Mcp-Param-OrderId header")
	})
	t.Run("mismatched header", func(t *testing.T) {
		h, body := newProtocolRequest(1, "tools/call", "request_risk_review", args)
		h.Set("Mcp-Param-OrderId", orderID(2))
		resp := post(t, testContext(t), srv.URL, h, body)
		assert.Equal(t, http.StatusBadRequest, resp.status)
		msgs := decodeMessages(t, resp)
		require.NotNil(t, msgs[0].Error)
		assert.Equal(t, int64(mcp.CodeHeaderMismatch), msgs[0].Error.Code)
	})
	t.Run("old protocol ignores the header binding", func(t *testing.T) {
		cs := connect(t, testContext(t), srv.URL, version20251125)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "request_risk_review", Arguments: args["arguments"]})
		require.NoError(t, err)
		assert.False(t, res.IsError)
	})
}

func TestBodyOverTheLimitIs413(t *testing.T) {
	h, err := New(Config{Name: "n", Version: "v", MaxBodyBytes: 64}, reviewTool(&recorder{}))
	require.NoError(t, err)
	srv := newLoopbackServer(t, h)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"` + strings.Repeat("x", 100) + `"}}`
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.status)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Equal(t, int64(jsonrpc.CodeInvalidRequest), msgs[0].Error.Code)
}

// 2025-03-26 is the one revision with JSON-RPC batches, and servers must
// accept them: each entry is a request of its own, answered in one array.
func TestBatchAtProtocol20250326RunsEachCallAndAnswersAnArray(t *testing.T) {
	for name, header := range map[string]http.Header{
		"no version header (means 2025-03-26)": nil,
		"2025-03-26 header":                    {"MCP-Protocol-Version": {version20250326}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, reviewTool(rec))
			body := "[" + reviewCall(1) + `,{"jsonrpc":"2.0","method":"notifications/initialized"},` + reviewCall(2) + "]"
			resp := post(t, testContext(t), srv.URL, header, body)
			require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
			msgs := decodeBatch(t, resp)
			require.Len(t, msgs, 2, "one answer per call, none for the notification")
			for _, m := range msgs {
				assert.Nil(t, m.Error)
				assert.Contains(t, string(m.Result), "PENDING")
			}
			assert.Len(t, rec.snapshot(), 2, "each call reaches the handler on its own")
		})
	}
}

// Batching was added in 2025-03-26 and removed in 2025-06-18: at any other
// version a batch is refused whole, before any entry is looked at.
func TestBatchIsRefusedAtProtocolVersionsWithoutBatching(t *testing.T) {
	for _, v := range []string{version20241105, version20250618, version20251125, version20260728} {
		t.Run(v, func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, reviewTool(rec))
			resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {v}}, batchOf(2))
			assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
			msgs := decodeMessages(t, resp)
			require.NotNil(t, msgs[0].Error, "%s", resp.body)
			assert.Equal(t, int64(jsonrpc.CodeInvalidRequest), msgs[0].Error.Code)
			assert.Contains(t, msgs[0].Error.Message, "batch")
			assert.Nil(t, msgs[0].ID)
			assert.Empty(t, rec.snapshot(), "nothing reaches the tool")
		})
	}
}

func TestBatchWithAnEntryThatIsNotJSONRPCIsRefusedWhole(t *testing.T) {
	for name, body := range map[string]string{
		"empty batch":           `[]`,
		"entry not JSON-RPC":    "[" + reviewCall(1) + `,{"hello":"world"}]`,
		"entry not an object":   "[" + reviewCall(1) + `,1]`,
		"nested batch as entry": "[" + reviewCall(1) + ",[" + reviewCall(2) + "]]",
		// 2025-03-26 (Lifecycle): "The initialize request MUST NOT be part
		// of a JSON-RPC batch"; run first, it would also set the revision
		// every other entry is judged at, unchecked.
		"initialize as entry": `[{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-07-28",` +
			`"capabilities":{},"clientInfo":{"name":"x","version":"1"}}},` + reviewCall(1) + "]",
		// Two requests under one id: one answer, and the client cannot tell
		// which call it belongs to (the other may never run).
		"repeated request id": "[" + reviewCall(7) + "," + reviewCall(7) + "]",
		"repeated string id":  `[{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","id":"a","method":"tools/list"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, reviewTool(rec))
			resp := post(t, testContext(t), srv.URL, nil, body)
			assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
			msgs := decodeMessages(t, resp)
			require.NotNil(t, msgs[0].Error, "%s", resp.body)
			assert.Equal(t, int64(jsonrpc.CodeInvalidRequest), msgs[0].Error.Code)
			assert.Empty(t, rec.snapshot(), "no entry runs")
		})
	}
}

// The argument checks run per call, so a batched call is refused exactly
// as the same call sent alone.
func TestBatchedCallsGetTheSameArgumentChecksAsASingleCall(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O00000000001","reason":"r","order_id":"O00000000002"}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O00000000001","reason":"r","x":[0]}}}]`
	resp := post(t, testContext(t), srv.URL, nil, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	msgs := decodeBatch(t, resp)
	require.Len(t, msgs, 2)
	want := map[float64]string{1: `duplicate property "order_id"`, 2: `unexpected property "x"`}
	for _, m := range msgs {
		var res struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(m.Result, &res))
		assert.True(t, res.IsError)
		assert.Equal(t, "INVALID_ARGUMENT", res.StructuredContent["code"])
		assert.Equal(t, want[m.ID.(float64)], res.StructuredContent["message"])
	}
	assert.Empty(t, rec.snapshot())
}

// The Idempotency-Key header names one call. A batch under it may hold one
// call of a tool that takes the header as its key, beside any others; a
// second such call is refused with the whole batch, naming both entries,
// before any of it runs. Tools that do not take the key are not counted.
func TestABatchUnderAnIdempotencyKeyMayHoldOneCallOfAToolThatTakesIt(t *testing.T) {
	keyedTool := func(rec *recorder) Tool {
		tool := reviewTool(rec)
		tool.TakesIdempotencyKey = true
		return tool
	}
	underKey := http.Header{"Idempotency-Key": {"k-1"}}
	t.Run("two calls that take it", func(t *testing.T) {
		rec := &recorder{}
		srv := startServer(t, keyedTool(rec))
		resp := post(t, testContext(t), srv.URL, underKey, batchOf(3))
		assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
		msgs := decodeMessages(t, resp)
		require.NotNil(t, msgs[0].Error, "%s", resp.body)
		assert.Equal(t, int64(jsonrpc.CodeInvalidRequest), msgs[0].Error.Code)
		assert.Contains(t, msgs[0].Error.Message, "batch entry 2")
		assert.Contains(t, msgs[0].Error.Message, "entry 1")
		assert.Contains(t, msgs[0].Error.Message, "operation_id")
		assert.Empty(t, rec.snapshot(), "nothing reaches the tool")
	})
	for _, tc := range []struct {
		name   string
		keyed  bool
		header http.Header
		body   string
		runs   int
	}{
		{"one call that takes it", true, underKey, "[" + reviewCall(1) + `,{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, 1},
		{"calls of a tool that does not take it", false, underKey, batchOf(2), 2},
		{"no header", true, nil, batchOf(2), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			tool := reviewTool(rec)
			tool.TakesIdempotencyKey = tc.keyed
			resp := post(t, testContext(t), startServer(t, tool).URL, tc.header, tc.body)
			require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
			assert.Len(t, rec.snapshot(), tc.runs)
		})
	}
}
