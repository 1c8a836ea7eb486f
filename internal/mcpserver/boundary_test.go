package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/requestid"
)

type principalKey struct{}

// withOuter wraps h the way an auth layer or the Lambda adapter would:
// a context value, a deadline, and optionally a preset request id.
func withOuter(h http.Handler, deadline time.Time, requestID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), principalKey{}, "user-42")
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		if requestID != "" {
			ctx = requestid.With(ctx, requestid.IDs{Request: requestID})
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

const validCall = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"request_risk_review",` +
	`"arguments":{"order_id":"O00000000001","reason":"r"}}}`

func TestHandlerSeesOuterContextValuesAndTheRequestDeadline(t *testing.T) {
	rec := &recorder{}
	h, err := New(Config{Name: "n", Version: "v"}, reviewTool(rec))
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	srv := newLoopbackServer(t, withOuter(h, deadline, ""))

	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, validCall)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)

	ctx := rec.lastContext()
	require.NotNil(t, ctx)
	assert.Equal(t, "user-42", ctx.Value(principalKey{}), "auth context must reach the tool")
	got, ok := ctx.Deadline()
	require.True(t, ok, "the SDK drops the deadline; the boundary must restore it")
	assert.True(t, got.Equal(deadline), "deadline %v, want %v", got, deadline)
}

func TestRequestIDPrecedence(t *testing.T) {
	far := time.Now().Add(time.Hour)
	cases := []struct {
		name      string
		preset    string
		header    string
		want      string
		generated bool
	}{
		{name: "the front's id wins", preset: "ctx-id", header: "hdr-id", want: "ctx-id"},
		{name: "caller's X-Request-Id is not trusted", header: "hdr-id", generated: true},
		{name: "none: a UUID", generated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			h, err := New(Config{Name: "n", Version: "v"}, reviewTool(rec))
			require.NoError(t, err)
			srv := newLoopbackServer(t, withOuter(h, far, tc.preset))
			header := http.Header{"MCP-Protocol-Version": {version20250618}}
			if tc.header != "" {
				header.Set(requestid.Header, tc.header)
			}
			resp := post(t, testContext(t), srv.URL, header, validCall)
			require.Equal(t, http.StatusOK, resp.status)
			calls := rec.snapshot()
			require.Len(t, calls, 1)
			got := calls[0].RequestID
			assert.Equal(t, got, resp.header.Get(requestid.Header), "echoed to the caller")
			assert.Equal(t, got, requestid.From(rec.lastContext()).Request)
			if tc.generated {
				assert.Len(t, got, 36)
				assert.NotEqual(t, tc.header, got)
			} else {
				assert.Equal(t, tc.want, got)
			}
			assert.Equal(t, "3", calls[0].JSONRPCID)
		})
	}
}

func TestSuccessNotMatchingOutputSchemaIsLoggedButReturned(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	sloppy := Tool{
		Name:         "sloppy",
		InputSchema:  json.RawMessage(`{"type":"object","additionalProperties":false}`),
		OutputSchema: json.RawMessage(reviewOutputSchema),
		Handler: func(context.Context, Call) *mcp.CallToolResult {
			return Success(map[string]string{"review_id": "R1", "status": "DONE"})
		},
	}
	h, err := New(Config{Name: "n", Version: "v", Logger: logger}, sloppy)
	require.NoError(t, err)
	srv := newLoopbackServer(t, h)
	cs := connect(t, testContext(t), srv.URL, version20260728)
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "sloppy"})
	require.NoError(t, err)
	assert.False(t, res.IsError, "a result that may report a real effect is never replaced")
	assert.Equal(t, "DONE", structured(t, res)["status"])
	assert.Contains(t, logs.String(), "tool result does not match its outputSchema")
	assert.NotContains(t, logs.String(), "server connecting", "SDK info lines are filtered")
}

func TestNewRejectsBadToolDefinitions(t *testing.T) {
	good := reviewTool(&recorder{})
	mutate := func(f func(*Tool)) Tool { t := good; f(&t); return t }
	cases := []struct {
		name  string
		cfg   Config
		tools []Tool
		want  string
	}{
		{"missing name", Config{Version: "v"}, nil, "Name and Config.Version are required"},
		{"open input schema", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) {
			t.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
		})}, `"additionalProperties": false`},
		{"input schema not an object", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) {
			t.InputSchema = json.RawMessage(`{"type":"string"}`)
		})}, `"type": "object"`},
		{"missing output schema", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) { t.OutputSchema = nil })}, "output schema: schema is empty"},
		{"output schema not an object", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) {
			t.OutputSchema = json.RawMessage(`{"type":"array"}`)
		})}, `output schema: schema root must have "type": "object" (got "array")`},
		{"output schema without a type", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) {
			t.OutputSchema = json.RawMessage(`{"properties":{}}`)
		})}, `output schema: schema root must have "type": "object" (got "")`},
		{"output schema not JSON", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) {
			t.OutputSchema = json.RawMessage(`{"type":"object",`)
		})}, "output schema: parsing schema"},
		{"bad tool name", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) { t.Name = "has space" })}, "must be 1-128 characters"},
		{"tool name too long", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) { t.Name = strings.Repeat("a", 129) })}, "must be 1-128 characters"},
		{"nil handler", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) { t.Handler = nil })}, "nil handler"},
		{"duplicate tool", Config{Name: "n", Version: "v"}, []Tool{good, good}, "registered twice"},
		{"bad x-mcp-header (SDK panic becomes error)", Config{Name: "n", Version: "v"}, []Tool{mutate(func(t *Tool) {
			t.InputSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object","x-mcp-header":"A"}}}`)
		})}, "rejected by the SDK"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, tc.tools...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// New checks a schema's shape only; resolving waits for the tool's first
// call, to keep it out of the cold start. A tool whose schema cannot be
// resolved is therefore refused at its call, before its handler runs, while
// every other tool works; ResolveSchemas finds it ahead of time.
func TestAToolWhoseSchemaDoesNotResolveIsRefusedAtItsCallAndFoundByResolveSchemas(t *testing.T) {
	var logs bytes.Buffer
	rec := &recorder{}
	broken := reviewTool(rec)
	broken.Name = "broken"
	broken.InputSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"https://example.com/x.json"}}}`)
	good := reviewTool(rec)

	err := ResolveSchemas(good, broken)
	require.Error(t, err)
	assert.ErrorContains(t, err, `tool "broken"`)
	assert.ErrorContains(t, err, "resolving schema")
	require.NoError(t, ResolveSchemas(good))

	h, err := New(Config{Name: "n", Version: "v", Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, good, broken)
	require.NoError(t, err)
	cs := connect(t, testContext(t), newLoopbackServer(t, h).URL, version20260728)
	listed, err := cs.ListTools(testContext(t), nil)
	require.NoError(t, err)
	assert.Len(t, listed.Tools, 2, "tools/list needs no resolved schema")

	_, err = cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "broken", Arguments: map[string]any{}})
	require.Error(t, err)
	assert.ErrorContains(t, err, `tool "broken" cannot be called`)
	assert.Empty(t, rec.snapshot(), "the handler never ran")
	assert.Contains(t, logs.String(), "tool schemas do not resolve")

	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "request_risk_review",
		Arguments: map[string]any{"order_id": orderID(1), "reason": "r"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "the other tools are unaffected")
}

// Extensions read fields of the request the SDK drops when it decodes the
// params (a 2025-11-25 tools/call's "task"): the boundary keeps them.
func TestHandlerSeesTheRequestsRawParams(t *testing.T) {
	rec := &recorder{}
	h, err := New(Config{Name: "n", Version: "v"}, reviewTool(rec))
	require.NoError(t, err)
	srv := newLoopbackServer(t, h)
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O00000000001","reason":"r"},"task":{"ttl":60000}}}`

	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20251125}}, call)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)

	ctx := rec.lastContext()
	require.NotNil(t, ctx)
	var params struct {
		Task map[string]any `json:"task"`
	}
	require.NoError(t, json.Unmarshal(RequestParams(ctx), &params))
	assert.Equal(t, map[string]any{"ttl": float64(60000)}, params.Task)
	assert.Nil(t, RequestParams(context.Background()), "outside a request: none")
}

// The 2025-11-25 tool name syntax: 1-128 of A-Z a-z 0-9 _ . -.
func TestToolNamesAreOneTo128OfTheSpecsAlphabet(t *testing.T) {
	for _, name := range []string{"a", "get_operation", "Risk.Review-2", strings.Repeat("z", 128)} {
		assert.True(t, validToolName(name), name)
	}
	for _, name := range []string{"", "has space", "a/b", "é", "a\x00", "tools:list", strings.Repeat("z", 129)} {
		assert.False(t, validToolName(name), "%q", name)
	}
}

// The SDK decodes params with case-sensitive member names, so what the
// boundary reads from them itself must be the same members: "NAME" is not
// the tool's name and "_META" is not _meta. A call whose params carry both
// "name" and "NAME" runs the tool "name" names (the SDK ignores "NAME"),
// and an unknown tool's invalid-params status follows the header's
// revision, not a version named under "_META".
func TestParamsMembersAreReadByTheirExactNames(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	ctx := testContext(t)

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_risk_review","NAME":"nope",` +
		`"arguments":{"order_id":"` + orderID(1) + `","reason":"r"}}}`
	resp := post(t, ctx, srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	msg := decodeMessages(t, resp)[0]
	require.Nil(t, msg.Error, "%s", resp.body)
	assert.Len(t, rec.snapshot(), 1, "the tool the SDK serves ran")

	body = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{},` +
		`"_META":{"` + mcp.MetaKeyProtocolVersion + `":"` + version20260728 + `"}}}`
	resp = post(t, ctx, srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)
	assert.Equal(t, http.StatusOK, resp.status, "a 2025-06-18 request's invalid params are HTTP 200: %s", resp.body)
	msg = decodeMessages(t, resp)[0]
	require.NotNil(t, msg.Error, "%s", resp.body)
	assert.EqualValues(t, -32602, msg.Error.Code)
}
