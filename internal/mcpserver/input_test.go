package mcpserver

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileArrayBody is the shape of the 4 MB argument attack: a valid order
// and reason plus an undeclared property holding a huge array.
func hostileArrayBody(size int) string {
	head := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"request_risk_review",` +
		`"arguments":{"order_id":"O00000000001","reason":"r","x":[0`
	tail := `]}}}`
	var b strings.Builder
	b.Grow(size + 16)
	b.WriteString(head)
	for b.Len() < size-len(tail) {
		b.WriteString(",0")
	}
	b.WriteString(tail)
	return b.String()
}

func TestFourMegabyteArgumentArrayIsRefusedAtTheDefaultBodyCap(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, hostileArrayBody(4_000_000))

	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.status, "%.300s", resp.body)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Contains(t, msgs[0].Error.Message, "exceeds")
	assert.Empty(t, rec.snapshot(), "nothing reaches the tool")
}

func TestBodyCapIsConfigurable(t *testing.T) {
	rec := &recorder{}
	h, err := New(Config{Name: "n", Version: "v", MaxBodyBytes: 256}, reviewTool(rec))
	require.NoError(t, err)
	srv := newLoopbackServer(t, h)
	header := http.Header{"MCP-Protocol-Version": {version20250618}}

	require.Equal(t, http.StatusOK, post(t, testContext(t), srv.URL, header, validCall).status, "a normal call fits")
	big := strings.Replace(validCall, `"reason":"r"`, `"reason":"`+strings.Repeat("r", 300)+`"`, 1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, post(t, testContext(t), srv.URL, header, big).status)
	assert.Len(t, rec.snapshot(), 1)
}

// The undeclared property is refused before the duplicate-key walk and the
// schema validation run: a duplicate key hidden inside it is never reached.
func TestUndeclaredArgumentIsRefusedBeforeTheExpensiveWalks(t *testing.T) {
	s := mustSchema(t, reviewInputSchema)
	_, problem := checkArguments(s, []byte(`{"order_id":"O00000000001","reason":"r","x":[{"a":1,"a":2}]}`))
	assert.Equal(t, `unexpected property "x"`, problem)
}

func TestOversizedArgumentsAreRefusedEvenUnderALargeBodyCap(t *testing.T) {
	rec := &recorder{}
	h, err := New(Config{Name: "n", Version: "v", MaxBodyBytes: 256 << 10}, reviewTool(rec))
	require.NoError(t, err)
	srv := newLoopbackServer(t, h)
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, hostileArrayBody(250_000))
	require.Equal(t, http.StatusOK, resp.status)
	msgs := decodeMessages(t, resp)
	require.Nil(t, msgs[0].Error)
	assert.Contains(t, string(msgs[0].Result), `unexpected property \"x\"`)
	assert.Empty(t, rec.snapshot())
}

func TestUnknownToolNameIsNotEchoedAtFullLength(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	name := strings.Repeat("n", 20_000)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)

	assert.Less(t, len(resp.body), 400, "answer %.200s", resp.body)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Contains(t, msgs[0].Error.Message, "unknown tool")
	assert.EqualValues(t, -32602, msgs[0].Error.Code)
	assert.Equal(t, float64(9), msgs[0].ID)
}

func TestInvalidUTF8IsRefusedNotReplaced(t *testing.T) {
	cases := map[string]string{
		"raw byte 0xff":        strings.Replace(validCall, `"reason":"r"`, "\"reason\":\"r\xff\"", 1),
		"truncated sequence":   strings.Replace(validCall, `"reason":"r"`, "\"reason\":\"r\xe2\x82\"", 1),
		"lone high surrogate":  strings.Replace(validCall, `"reason":"r"`, `"reason":"r\ud800"`, 1),
		"lone low surrogate":   strings.Replace(validCall, `"reason":"r"`, `"reason":"\udc00r"`, 1),
		"reversed surrogates":  strings.Replace(validCall, `"reason":"r"`, `"reason":"\udc00\ud800"`, 1),
		"invalid in tool name": strings.Replace(validCall, `"request_risk_review"`, "\"request_risk_review\xc0\"", 1),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, reviewTool(rec))
			resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)
			assert.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
			msgs := decodeMessages(t, resp)
			require.NotNil(t, msgs[0].Error)
			assert.Contains(t, msgs[0].Error.Message, "UTF-8")
			assert.Empty(t, rec.snapshot(), "nothing reaches the tool")
			assert.False(t, bytes.Contains(resp.body, []byte("\ufffd")))
		})
	}
}

func TestValidSurrogatePairAndEscapedBackslashAreAccepted(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	body := strings.Replace(validCall, `"reason":"r"`, `"reason":"r \ud83d\ude00 \\ud800 é"`, 1)
	resp := post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}}, body)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	require.Len(t, rec.snapshot(), 1)
}

// A huge array sent as a declared string property is refused by its
// top-level type before the walks visit its elements.
func TestContainerForAScalarPropertyIsRefusedBeforeTheExpensiveWalks(t *testing.T) {
	s := mustSchema(t, reviewInputSchema)
	_, problem := checkArguments(s, []byte(`{"order_id":"O00000000001","reason":[{"a":1,"a":2}]}`))
	assert.Equal(t, `reason: must be a string`, problem)
}

// No error answer echoes caller input at full length: a long Mcp-Name
// header the SDK finds mismatched, or a long unknown method.
func TestErrorAnswersDoNotEchoLongCallerInput(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	long := strings.Repeat("m", 20_000)

	h, body := newProtocolRequest(4, "tools/call", long, map[string]any{"name": "request_risk_review",
		"arguments": map[string]any{"order_id": orderID(4), "reason": "r"}})
	resp := post(t, testContext(t), srv.URL, h, body)
	assert.Equal(t, http.StatusBadRequest, resp.status)
	assert.Less(t, len(resp.body), 1000, "answer %.200s", resp.body)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.Contains(t, msgs[0].Error.Message, "header mismatch")

	resp = post(t, testContext(t), srv.URL, http.Header{"MCP-Protocol-Version": {version20250618}},
		`{"jsonrpc":"2.0","id":5,"method":"`+long+`","params":{}}`)
	assert.Less(t, len(resp.body), 1000, "answer %.200s", resp.body)
	msgs = decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.EqualValues(t, 5, msgs[0].ID)
}

// The largest legitimate call, a resolution with 1,000 characters of
// evidence each sent as an escaped surrogate pair, fits the default cap
// with room for the protocol envelope.
func TestLargestLegitimateCallFitsTheDefaultBodyCap(t *testing.T) {
	evidence := strings.Repeat(`\ud83d\ude00`, 1000)
	_, body := newProtocolRequest(1, "tools/call", "resolve_operation", map[string]any{"name": "resolve_operation",
		"arguments": map[string]any{"handle": "op_" + strings.Repeat("a", 26), "resolution": "SUCCEEDED", "resource_id": strings.Repeat("r", 128)}})
	body = strings.Replace(body, `"resolution":"SUCCEEDED"`, `"resolution":"SUCCEEDED","evidence":"`+evidence+`"`, 1)
	assert.Less(t, len(body)+4<<10, DefaultMaxBodyBytes, "body of %d bytes plus 4 KiB of headroom", len(body))
}

// API Gateway throttles HTTP requests, not the calls inside them: a batch
// past the limit is refused whole, before any of it runs, so one request
// costs at most maxBatchEntries calls.
func TestBatchOverTheEntryLimitIsRefusedBeforeAnyCallRuns(t *testing.T) {
	for _, n := range []int{maxBatchEntries + 1, 150} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rec := &recorder{}
			srv := startServer(t, reviewTool(rec))
			body := batchOf(n)
			require.Less(t, len(body), DefaultMaxBodyBytes, "the batch fits under the body cap")
			resp := post(t, testContext(t), srv.URL, nil, body)

			assert.Equal(t, http.StatusBadRequest, resp.status, "%.300s", resp.body)
			msgs := decodeMessages(t, resp)
			require.NotNil(t, msgs[0].Error, "%.300s", resp.body)
			assert.Equal(t, int64(jsonrpc.CodeInvalidRequest), msgs[0].Error.Code)
			assert.Contains(t, msgs[0].Error.Message, fmt.Sprintf("at most %d", maxBatchEntries))
			assert.Nil(t, msgs[0].ID)
			assert.Empty(t, rec.snapshot(), "no call runs")
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		rec := &recorder{}
		srv := startServer(t, reviewTool(rec))
		resp := post(t, testContext(t), srv.URL, nil, batchOf(maxBatchEntries))
		require.Equal(t, http.StatusOK, resp.status, "%.300s", resp.body)
		assert.Len(t, decodeBatch(t, resp), maxBatchEntries)
		assert.Len(t, rec.snapshot(), maxBatchEntries)
	})
}

// Each batch entry gets the checks a single message gets. An entry naming
// an unknown tool refuses the whole batch (as the SDK refuses one naming an
// unknown method), naming the tool shortened as for a single call.
func TestBatchedUnknownToolNameIsNotEchoedAtFullLength(t *testing.T) {
	rec := &recorder{}
	srv := startServer(t, reviewTool(rec))
	name := strings.Repeat("n", 20_000)
	body := "[" + reviewCall(1) + `,{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}]`
	resp := post(t, testContext(t), srv.URL, nil, body)

	assert.Equal(t, http.StatusBadRequest, resp.status)
	assert.Less(t, len(resp.body), 400, "answer %.200s", resp.body)
	msgs := decodeMessages(t, resp)
	require.NotNil(t, msgs[0].Error)
	assert.EqualValues(t, jsonrpc.CodeInvalidParams, msgs[0].Error.Code)
	assert.Contains(t, msgs[0].Error.Message, "batch entry 2: unknown tool")
	assert.Contains(t, msgs[0].Error.Message, "(20000 bytes)")
	assert.Empty(t, rec.snapshot(), "no entry runs")
}

// The JSON-RPC decoder quotes a bad "jsonrpc" tag whole; the boundary's
// answer cuts it, alone or in a batch.
func TestBadJSONRPCTagIsNotEchoedAtFullLength(t *testing.T) {
	srv := startServer(t, reviewTool(&recorder{}))
	bad := `{"jsonrpc":"` + strings.Repeat("v", 20_000) + `","id":1,"method":"tools/list"}`
	for name, body := range map[string]string{"alone": bad, "in a batch": "[" + bad + "]"} {
		t.Run(name, func(t *testing.T) {
			resp := post(t, testContext(t), srv.URL, nil, body)
			assert.Equal(t, http.StatusBadRequest, resp.status)
			assert.Less(t, len(resp.body), 1000, "answer %.200s", resp.body)
			msgs := decodeMessages(t, resp)
			require.NotNil(t, msgs[0].Error)
			assert.EqualValues(t, jsonrpc.CodeInvalidRequest, msgs[0].Error.Code)
			assert.Contains(t, msgs[0].Error.Message, "version tag")
		})
	}
}
