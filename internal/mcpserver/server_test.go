package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var clientVersions = []string{version20260728, version20251125, version20250618}

func TestClientsOfEveryProtocolVersionNegotiateTheirVersion(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	for _, v := range clientVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, testContext(t), srv.URL, v)
			init := cs.InitializeResult()
			require.NotNil(t, init)
			assert.Equal(t, v, init.ProtocolVersion)
			assert.Equal(t, "test instructions", init.Instructions)
			require.NotNil(t, init.Capabilities.Tools)
			assert.False(t, init.Capabilities.Tools.ListChanged, "a stateless server cannot push list changes")
			assert.Nil(t, init.Capabilities.Logging)
		})
	}
}

func TestListToolsShowsClosedInputSchemaAndOutputSchema(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	for _, v := range clientVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, testContext(t), srv.URL, v)
			res, err := cs.ListTools(testContext(t), nil)
			require.NoError(t, err)
			require.Len(t, res.Tools, 1)
			tool := res.Tools[0]
			assert.Equal(t, "request_risk_review", tool.Name)
			assert.Equal(t, "Request a risk review", tool.Title)
			in, ok := tool.InputSchema.(map[string]any)
			require.True(t, ok, "input schema %T", tool.InputSchema)
			assert.Equal(t, false, in["additionalProperties"])
			assert.Equal(t, "object", in["type"])
			out, ok := tool.OutputSchema.(map[string]any)
			require.True(t, ok, "output schema %T", tool.OutputSchema)
			assert.Equal(t, "object", out["type"])
			shapes, ok := out["anyOf"].([]any)
			require.True(t, ok, "output schema joins the tool's shape and the error envelope: %v", out)
			require.Len(t, shapes, 2)
			assert.Equal(t, []any{"review_id", "status"}, shapes[0].(map[string]any)["required"])
			assert.Equal(t, []any{"code", "message", "retry_allowed"}, shapes[1].(map[string]any)["required"])
			require.NotNil(t, tool.Annotations)
			assert.True(t, tool.Annotations.IdempotentHint)
		})
	}
}

func TestValidCallReachesHandlerWithIdempotencyKeyAndRequestFacts(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	output := mustSchema(t, reviewOutputSchema)
	for i, v := range clientVersions {
		t.Run(v, func(t *testing.T) {
			ctx := testContext(t)
			cs := connect(t, ctx, srv.URL, v)
			key := "key-" + v
			res, err := cs.CallTool(withIdempotencyKey(ctx, key), &mcp.CallToolParams{
				Name:      "request_risk_review",
				Arguments: map[string]any{"order_id": orderID(i), "reason": "chargeback pattern"},
			})
			require.NoError(t, err)
			require.False(t, res.IsError, "result: %+v", res.Content)

			sc := structured(t, res)
			assert.Equal(t, "R-"+orderID(i), sc["review_id"])
			assert.Equal(t, key, sc["idempotency_key"])
			// Success output satisfies the tool's outputSchema, and the text
			// content carries the same JSON for clients that ignore it.
			data, err := json.Marshal(res.StructuredContent)
			require.NoError(t, err)
			_, err = output.validateJSON(data)
			require.NoError(t, err)
			require.Len(t, res.Content, 1)
			assert.JSONEq(t, string(data), res.Content[0].(*mcp.TextContent).Text)

			calls := rec.snapshot()
			call := calls[len(calls)-1]
			assert.Equal(t, key, call.IdempotencyKey)
			assert.Equal(t, v, call.ProtocolVersion)
			assert.Equal(t, "request_risk_review", call.Tool)
			assert.NotEmpty(t, call.RequestID)
			assert.NotEmpty(t, call.JSONRPCID)
			assert.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"reason":"chargeback pattern"}`, orderID(i)), string(call.Arguments))
		})
	}
}

func TestInvalidArgumentsAreToolErrorsAndNeverReachTheHandler(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	envelope := mustEnvelope(t, testCodes)
	cases := []struct {
		name    string
		args    any
		message string
	}{
		{"extra property", map[string]any{"order_id": orderID(1), "reason": "r", "foo": 1}, `unexpected property "foo"`},
		{"two extra properties", map[string]any{"order_id": orderID(1), "reason": "r", "b": 1, "a": 2}, `unexpected properties "a", "b"`},
		{"overlong reason", map[string]any{"order_id": orderID(1), "reason": strings.Repeat("x", 501)}, "reason: length must be <= 500"},
		{"empty reason", map[string]any{"order_id": orderID(1), "reason": ""}, "reason: length must be >= 1"},
		{"pattern violation", map[string]any{"order_id": "ORDER-1", "reason": "r"}, "order_id: must match the pattern ^O[0-9]{11}$"},
		{"missing required", map[string]any{"reason": "r"}, `missing required property "order_id"`},
		{"wrong type", map[string]any{"order_id": 7, "reason": "r"}, "order_id: must be a string"},
		{"not an integer", map[string]any{"order_id": orderID(1), "reason": "r", "priority": 1.5}, "priority: must be an integer"},
		{"above maximum", map[string]any{"order_id": orderID(1), "reason": "r", "priority": 9}, "priority: must be <= 5"},
		{"no arguments", nil, `missing required property "order_id"`},
		{"arguments not an object", []string{"a"}, "arguments must be a JSON object"},
	}
	for _, v := range []string{version20260728, version20251125} {
		cs := connect(t, testContext(t), srv.URL, v)
		for _, tc := range cases {
			t.Run(v+"/"+tc.name, func(t *testing.T) {
				before := len(rec.snapshot())
				res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "request_risk_review", Arguments: tc.args})
				require.NoError(t, err, "bad arguments must not be a JSON-RPC error")
				assert.True(t, res.IsError)
				sc := structured(t, res)
				assert.Equal(t, "INVALID_ARGUMENT", sc["code"])
				assert.Equal(t, tc.message, sc["message"])
				assert.Equal(t, false, sc["retry_allowed"])
				next, _ := sc["next_action"].(map[string]any)
				assert.Equal(t, "request_risk_review", next["tool"])

				data, _ := json.Marshal(res.StructuredContent)
				_, err = envelope.validateJSON(data)
				assert.NoError(t, err, "error result must match ErrorEnvelopeSchema")
				assert.Len(t, rec.snapshot(), before, "handler must not run")
			})
		}
	}
}

func TestDuplicateArgumentKeysAreRejected(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	// The go-sdk client cannot send duplicate keys, so speak raw 2025-06-18.
	header := map[string][]string{"MCP-Protocol-Version": {version20250618}}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O00000000001","reason":"r","order_id":"O00000000002"}}}`
	resp := post(t, testContext(t), srv.URL, header, body)
	require.Equal(t, 200, resp.status, "%s", resp.body)
	msgs := decodeMessages(t, resp)
	require.Len(t, msgs, 1)
	var res struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Result, &res))
	assert.True(t, res.IsError)
	assert.Equal(t, "INVALID_ARGUMENT", res.StructuredContent["code"])
	assert.Equal(t, `duplicate property "order_id"`, res.StructuredContent["message"])
	assert.Empty(t, rec.snapshot())
}

func TestMoreThanOneIdempotencyKeyHeaderIsInvalid(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	header := map[string][]string{
		"MCP-Protocol-Version": {version20250618},
		HeaderIdempotencyKey:   {"k1", "k2"},
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O00000000001","reason":"r"}}}`
	msgs := decodeMessages(t, post(t, testContext(t), srv.URL, header, body))
	require.Len(t, msgs, 1)
	assert.Contains(t, string(msgs[0].Result), `more than one Idempotency-Key header`)
	assert.Empty(t, rec.snapshot())
}

func TestUnknownToolIsJSONRPCError(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	for _, v := range clientVersions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, testContext(t), srv.URL, v)
			_, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
			require.Error(t, err)
			var rpcErr *jsonrpc.Error
			require.True(t, errors.As(err, &rpcErr), "want a JSON-RPC error, got %v", err)
			assert.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
			assert.Contains(t, rpcErr.Message, `unknown tool "no_such_tool"`)
		})
	}
}

func TestHandlerPanicIsOperationUnknownNotACrash(t *testing.T) {
	panicky := Tool{
		Name:         "panicky",
		InputSchema:  json.RawMessage(`{"type":"object","additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Handler:      func(context.Context, Call) *mcp.CallToolResult { panic("boom") },
	}
	nilResult := Tool{
		Name:         "nil_result",
		InputSchema:  json.RawMessage(`{"type":"object","additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Handler:      func(context.Context, Call) *mcp.CallToolResult { return nil },
	}
	srv := startServer(t, panicky, nilResult)
	cs := connect(t, testContext(t), srv.URL, version20260728)
	for _, name := range []string{"panicky", "nil_result"} {
		res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: name})
		require.NoError(t, err)
		assert.True(t, res.IsError)
		sc := structured(t, res)
		assert.Equal(t, "OPERATION_UNKNOWN", sc["code"])
		assert.Equal(t, true, sc["retry_allowed"])
	}
	// The server is still serving.
	_, err := cs.ListTools(testContext(t), nil)
	require.NoError(t, err)
}

func TestConcurrentClientsAgainstOneHandler(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	clients := []*mcp.ClientSession{
		connect(t, testContext(t), srv.URL, version20260728),
		connect(t, testContext(t), srv.URL, version20251125),
	}
	const perClient = 25
	var wg sync.WaitGroup
	errs := make(chan error, len(clients)*perClient)
	for c, cs := range clients {
		for i := range perClient {
			wg.Go(func() {
				n := c*perClient + i
				key := fmt.Sprintf("key-%d", n)
				res, err := cs.CallTool(withIdempotencyKey(testContext(t), key), &mcp.CallToolParams{
					Name:      "request_risk_review",
					Arguments: map[string]any{"order_id": orderID(n), "reason": "r"},
				})
				if err != nil {
					errs <- err
					return
				}
				sc := structured(t, res)
				if sc["review_id"] != "R-"+orderID(n) || sc["idempotency_key"] != key {
					errs <- fmt.Errorf("call %d got %v", n, sc)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	calls := rec.snapshot()
	require.Len(t, calls, len(clients)*perClient)
	seen := map[string]bool{}
	for _, c := range calls {
		assert.False(t, seen[c.RequestID], "request ids must be unique")
		seen[c.RequestID] = true
	}
}
