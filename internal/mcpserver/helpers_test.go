package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

const (
	version20260728 = "2026-07-28"
	version20251125 = "2025-11-25"
	version20250618 = "2025-06-18"
	version20250326 = "2025-03-26"
	version20241105 = "2024-11-05"
)

const reviewInputSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "order_id": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^O[0-9]{11}$"},
    "reason": {"type": "string", "minLength": 1, "maxLength": 500},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5}
  },
  "required": ["order_id", "reason"]
}`

const reviewOutputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "review_id": {"type": "string"},
    "status": {"enum": ["PENDING", "SUCCEEDED", "FAILED", "UNKNOWN"]},
    "idempotency_key": {"type": "string"}
  },
  "required": ["review_id", "status"]
}`

// recorder remembers the calls that reached a test tool's handler.
type recorder struct {
	mu    sync.Mutex
	calls []Call
	ctxs  []context.Context
}

func (r *recorder) record(ctx context.Context, c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	r.ctxs = append(r.ctxs, ctx)
}

func (r *recorder) snapshot() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

func (r *recorder) lastContext() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ctxs) == 0 {
		return nil
	}
	return r.ctxs[len(r.ctxs)-1]
}

type reviewArgs struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// reviewTool is a stand-in for request_risk_review: it echoes the order and
// the idempotency key so tests can match results to calls.
func reviewTool(rec *recorder) Tool {
	return Tool{
		Name:         "request_risk_review",
		Title:        "Request a risk review",
		Description:  "Request a risk review for an order the caller may operate.",
		InputSchema:  json.RawMessage(reviewInputSchema),
		OutputSchema: json.RawMessage(reviewOutputSchema),
		Annotations:  &mcp.ToolAnnotations{IdempotentHint: true},
		Handler: func(ctx context.Context, call Call) *mcp.CallToolResult {
			rec.record(ctx, call)
			var args reviewArgs
			if err := json.Unmarshal(call.Arguments, &args); err != nil {
				return BusinessError(CodeInvalidArgument, err.Error(), false, nil)
			}
			return Success(map[string]string{
				"review_id":       "R-" + args.OrderID,
				"status":          "PENDING",
				"idempotency_key": call.IdempotencyKey,
			})
		},
	}
}

func startServer(t *testing.T, tools ...Tool) *httptest.Server {
	t.Helper()
	h, err := New(Config{Name: "intentgate-test", Version: "0.0.1", Instructions: "test instructions", ErrorCodes: testCodes}, tools...)
	require.NoError(t, err)
	return newLoopbackServer(t, h)
}

func newLoopbackServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h) // listens on 127.0.0.1, port chosen at run time
	t.Cleanup(srv.Close)
	return srv
}

type idempotencyKeyCtx struct{}

// withIdempotencyKey makes the test client's transport send key as the
// Idempotency-Key header of the HTTP request carrying the call.
func withIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// headerTransport adds per-call headers to the client's HTTP requests.
type headerTransport struct{ base http.RoundTripper }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if key, ok := r.Context().Value(idempotencyKeyCtx{}).(string); ok {
		r = r.Clone(r.Context())
		r.Header.Set(HeaderIdempotencyKey, key)
	}
	return t.base.RoundTrip(r)
}

// connect opens a go-sdk client session at the given protocol version:
// 2026-07-28 uses server/discover, older versions the initialize handshake.
func connect(t *testing.T, ctx context.Context, url, protocolVersion string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: headerTransport{base: http.DefaultTransport}},
		MaxRetries: -1,
	}
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawResponse is an HTTP answer read whole.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, ctx context.Context, url string, header http.Header, body string) rawResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: data}
}

// newProtocolRequest builds a 2026-07-28 request: the version, client info
// and capabilities travel in _meta of every request, and the Mcp-Method /
// Mcp-Name headers repeat the method and tool name.
func newProtocolRequest(id int, method, name string, params map[string]any) (http.Header, string) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		mcp.MetaKeyProtocolVersion:    version20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "raw-client", "version": "1"},
		mcp.MetaKeyClientCapabilities: map[string]any{},
	}
	body := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}
	h := http.Header{}
	h.Set("MCP-Protocol-Version", version20260728)
	h.Set("Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	data, _ := json.Marshal(body)
	return h, string(data)
}

// rpcMessage is a decoded JSON-RPC response.
type rpcMessage struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// decodeMessages reads a JSON or SSE response body into its JSON-RPC
// messages.
func decodeMessages(t *testing.T, resp rawResponse) []rpcMessage {
	t.Helper()
	if strings.HasPrefix(resp.header.Get("Content-Type"), "text/event-stream") {
		var msgs []rpcMessage
		for _, line := range bytes.Split(resp.body, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				var m rpcMessage
				require.NoError(t, json.Unmarshal(bytes.TrimSpace(data), &m), "SSE data %s", data)
				msgs = append(msgs, m)
			}
		}
		return msgs
	}
	var m rpcMessage
	require.NoError(t, json.Unmarshal(resp.body, &m), "body %s", resp.body)
	return []rpcMessage{m}
}

// structured decodes a tool result's structuredContent.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

// testCodes are the business codes the tests' tools answer with, as a
// server's caller registers its own (Config.ErrorCodes).
var testCodes = []string{"UNAUTHENTICATED", "INVALID_ARGUMENT", "NOT_FOUND", "FORBIDDEN", "IDEMPOTENCY_CONFLICT",
	"TEMPORARY_UNAVAILABLE", "OVERLOADED", "PRECONDITION_FAILED", "OPERATION_UNKNOWN", "OPERATION_FAILED", "OPERATION_ESCALATED"}

// mustEnvelope is the error envelope's schema for codes, compiled.
func mustEnvelope(t *testing.T, codes []string) *compiledSchema {
	t.Helper()
	raw, err := errorEnvelopeSchema(errorCodes(codes))
	require.NoError(t, err)
	return mustSchema(t, string(raw))
}

func mustSchema(t *testing.T, raw string) *compiledSchema {
	t.Helper()
	s, err := compileObjectSchema(json.RawMessage(raw), false)
	require.NoError(t, err)
	s.problems = newProblemNode(s.schema)
	return s
}

func orderID(n int) string { return fmt.Sprintf("O%011d", n) }

// decodeBatch reads a JSON-RPC batch answer (an array) into its messages.
func decodeBatch(t *testing.T, resp rawResponse) []rpcMessage {
	t.Helper()
	var msgs []rpcMessage
	require.NoError(t, json.Unmarshal(resp.body, &msgs), "body %.300s", resp.body)
	return msgs
}

// reviewCall is a raw tools/call of the review tool with JSON-RPC id id.
func reviewCall(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"request_risk_review",`+
		`"arguments":{"order_id":"%s","reason":"r"}}}`, id, orderID(id))
}

// batchOf is a JSON-RPC batch of n review calls, ids 1..n.
func batchOf(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = reviewCall(i + 1)
	}
	return "[" + strings.Join(entries, ",") + "]"
}
