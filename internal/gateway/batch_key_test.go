package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/tools"
)

// postWithKey sends body as a 2025-03-26 request (no version header) with
// the given Idempotency-Key header, if any, and returns the status and body.
func postWithKey(t *testing.T, url, idempotencyKey, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// refundsOnLoopback serves the refund tool on a fresh table behind a gate
// of two slots and a queue of two.
func refundsOnLoopback(t *testing.T) (*httptest.Server, *refundTool) {
	t.Helper()
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 2, MaxQueue: 2, MaxWait: time.Second})
	require.NoError(t, err)
	refund := &refundTool{}
	return serveRefunds(t, ex, gate, refund), refund
}

func batchedRefund(id int, charge string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"issue_refund","arguments":{"charge_id":%q}}}`, id, charge)
}

// The Idempotency-Key header names one call, but a JSON-RPC batch is one
// HTTP request holding several: two writes under it would share one key,
// so the second would be told its key was "used with other arguments" (or,
// with the same arguments, be taken for the first's replay). Such a batch
// is refused whole with an answer saying what to send instead, and nothing
// in it runs or is recorded.
func TestABatchOfTwoWritesUnderOneIdempotencyKeyIsRefusedAndNothingRuns(t *testing.T) {
	srv, refund := refundsOnLoopback(t)

	status, body := postWithKey(t, srv.URL, "batch-key-1", "["+batchedRefund(1, "ch_key_1")+","+batchedRefund(2, "ch_key_2")+"]")

	assert.Equal(t, http.StatusBadRequest, status, "%s", body)
	assert.Contains(t, body, "Idempotency-Key")
	assert.Contains(t, body, "operation_id", "says what to send instead")
	assert.Equal(t, int32(0), refund.sent.Load(), "nothing reached the provider")

	// Nothing was recorded: the key is still free for either charge.
	status, body = postWithKey(t, srv.URL, "batch-key-1", batchedRefund(3, "ch_key_2"))
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Contains(t, body, "SUCCEEDED", "a fresh write, not a conflict with the batch's first call")
	assert.NotContains(t, body, `"deduplicated":true`)
	assert.Equal(t, int32(1), refund.sent.Load())
}

// One write under the header, beside calls that take no key, is what the
// header is for, and runs; so does a batch of writes without the header,
// each under a key of its own.
func TestABatchWithOneWriteUnderTheIdempotencyKeyRuns(t *testing.T) {
	srv, refund := refundsOnLoopback(t)

	listTools := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	status, body := postWithKey(t, srv.URL, "batch-key-2", "["+batchedRefund(1, "ch_key_3")+","+listTools+"]")
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Contains(t, body, "SUCCEEDED")
	assert.Equal(t, int32(1), refund.sent.Load())

	status, body = postWithKey(t, srv.URL, "", "["+batchedRefund(1, "ch_key_4")+","+batchedRefund(2, "ch_key_5")+"]")
	require.Equal(t, http.StatusOK, status, "%s", body)
	assert.Equal(t, 2, strings.Count(body, `"status":"SUCCEEDED"`), "%s", body)
	assert.Equal(t, int32(3), refund.sent.Load())
}

// A refusal of the arguments by the tool's own checks (past the schema)
// tells the caller what to do next as a schema refusal does: nothing was
// sent or recorded, correct the arguments and call the tool again.
func TestAToolsOwnRefusalOfItsArgumentsSaysWhatToDoNext(t *testing.T) {
	srv, refund := refundsOnLoopback(t)

	// A '|' passes the schema but not the business key's rules.
	status, body := postWithKey(t, srv.URL, "", batchedRefund(1, "ch|1"))
	require.Equal(t, http.StatusOK, status, "%s", body)
	var msg struct {
		Result struct {
			StructuredContent struct {
				Code       string `json:"code"`
				NextAction struct {
					Tool, Hint string
				} `json:"next_action"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &msg), body)
	sc := msg.Result.StructuredContent
	assert.Equal(t, string(tools.CodeInvalidArgument), sc.Code, body)
	assert.Equal(t, "issue_refund", sc.NextAction.Tool, body)
	assert.Contains(t, sc.NextAction.Hint, "correct the arguments", body)
	assert.Equal(t, int32(0), refund.sent.Load())
}

// An Idempotency-Key header without a value names no call: each write
// takes the key its own arguments (or the server) give it, exactly as the
// tool call reads the header (trimmed, empty is none). A batch of writes
// with their own operation_ids under such a header is legitimate and runs.
func TestABatchUnderAnEmptyIdempotencyKeyHeaderIsABatchWithoutOne(t *testing.T) {
	st := engine.NewStore(t)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: admission.DefaultBudget()})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 2, MaxQueue: 2, MaxWait: time.Second})
	require.NoError(t, err)
	refund := &refundTool{}
	srv := serveRefunds(t, ex, gate, refund)

	withID := func(id int, charge, opID string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"issue_refund","arguments":{"charge_id":%q,"operation_id":%q}}}`, id, charge, opID)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("["+withID(1, "ch_key_6", "op-empty-1")+","+withID(2, "ch_key_7", "op-empty-2")+"]"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header["Idempotency-Key"] = []string{""}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	assert.Equal(t, 2, strings.Count(string(data), `"status":"SUCCEEDED"`), "%s", data)
	assert.Equal(t, int32(2), refund.sent.Load())
}
