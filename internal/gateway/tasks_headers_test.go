package gateway_test

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tasks"
)

// postWithHeaders sends one 2026-07-28 request whose _meta opts in to the
// Tasks extension, with exactly the headers given (besides the content
// negotiation ones), and returns the HTTP status and the decoded body.
func (w *taskWorld) postWithHeaders(t *testing.T, method string, params map[string]any, header http.Header) (int, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "raw", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"extensions": map[string]any{tasks.Extension: map[string]any{}}},
	}
	return w.postRPC(t, method, params, header)
}

// pendingTask opens a 2026-07-28 task whose operation stays PENDING (the
// state write after dispatch is lost) and returns its id.
func (w *taskWorld) pendingTask(t *testing.T, opID string) string {
	t.Helper()
	w.lossy.action = "UpdateItem"
	created := w.post(t, "2026-07-28", "tools/call", refundCall(opID, false), true)
	require.Nil(t, created["error"], "%v", created)
	res := created["result"].(map[string]any)
	require.Equal(t, "task", res["resultType"], "%v", res)
	return res["taskId"].(string)
}

// The Tasks extension, Streamable HTTP: Routing Headers: "When tasks/get,
// tasks/update, or tasks/cancel is sent over the Streamable HTTP
// transport, the client MUST set the Mcp-Name header to the value of
// params.taskId", so that intermediaries route and throttle on it; and
// 2026-07-28 Streamable HTTP, Server Validation: "Servers that process the
// request body MUST reject requests where the values specified in the
// headers do not match the corresponding values in the request body",
// missing required headers included, "HTTP status 400 Bad Request" with
// "-32020 (HeaderMismatch)". The SDK knows Mcp-Name only for tools/call,
// resources/read and prompts/get, so a tasks request naming another task
// in its header, or none, was served.
func TestTasksRequestsMustNameTheirTaskInMcpName(t *testing.T) {
	w := newTaskWorld(t)
	id := w.pendingTask(t, "op-mcp-name-0001")
	for _, method := range []string{tasks.MethodGet, tasks.MethodCancel, tasks.MethodUpdate} {
		params := func() map[string]any {
			p := map[string]any{"taskId": id}
			if method == tasks.MethodUpdate {
				p["inputResponses"] = map[string]any{}
			}
			return p
		}
		for name, value := range map[string]string{
			"missing":       "",
			"another id":    "tsk_someone_elses",
			"encoded other": "=?base64?" + base64.StdEncoding.EncodeToString([]byte("tsk_other")) + "?=",
		} {
			h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}}
			if value != "" {
				h.Set("Mcp-Name", value)
			}
			status, reply := w.postWithHeaders(t, method, params(), h)
			e, _ := reply["error"].(map[string]any)
			require.NotNil(t, e, "%s, Mcp-Name %s: %v", method, name, reply)
			assert.Equal(t, float64(-32020), e["code"], "%s, Mcp-Name %s: %v", method, name, e)
			assert.Equal(t, http.StatusBadRequest, status, "%s, Mcp-Name %s", method, name)
		}
		// The id itself, plain or in the Base64 sentinel form, passes the check.
		for _, value := range []string{id, "=?base64?" + base64.StdEncoding.EncodeToString([]byte(id)) + "?="} {
			h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}, "Mcp-Name": {value}}
			_, reply := w.postWithHeaders(t, method, params(), h)
			if e, ok := reply["error"].(map[string]any); ok {
				assert.NotEqual(t, float64(-32020), e["code"], "%s, Mcp-Name %q: %v", method, value, e)
			}
		}
	}
}

// The Tasks extension, Task Update Requests: "On success, the server MUST
// acknowledge the request with an empty result", and "A server SHOULD
// ignore any inputResponses responses mapped to a key that is not
// currently outstanding for the task — including keys that were never
// issued". No task here ever asks for input, so every key is one never
// issued: the update of a task the caller may see is acknowledged, not
// refused as invalid params (which the specification reserves for an
// invalid or nonexistent taskId).
func TestTasksUpdateOfAVisibleTaskIsAcknowledged(t *testing.T) {
	w := newTaskWorld(t)
	id := w.pendingTask(t, "op-update-ack-0001")
	reply := w.post(t, "2026-07-28", tasks.MethodUpdate, map[string]any{"taskId": id,
		"inputResponses": map[string]any{"never-issued": map[string]any{"action": "accept", "content": map[string]any{}}}}, true)
	require.Nil(t, reply["error"], "%v", reply)
	res := reply["result"].(map[string]any)
	assert.Equal(t, "complete", res["resultType"])
	assert.NotContains(t, res, "taskId", "an empty acknowledgement")

	got := w.post(t, "2026-07-28", tasks.MethodGet, map[string]any{"taskId": id}, true)
	require.Nil(t, got["error"], "%v", got)
	assert.Equal(t, "working", got["result"].(map[string]any)["status"], "the update changed nothing")

	// An unknown task is still "not found".
	e, _ := w.post(t, "2026-07-28", tasks.MethodUpdate, map[string]any{"taskId": "tsk_x", "inputResponses": map[string]any{}}, true)["error"].(map[string]any)
	require.NotNil(t, e)
	assert.Equal(t, float64(-32602), e["code"])
}

// The Tasks extension, Task Cancellation: "On success, the server MUST
// acknowledge the request with an empty result ... Cancellation is
// cooperative: The request signals intent, and the server decides whether
// and when to honor it. A server is not obligated to actually stop the
// work; it is only obligated to acknowledge the request", and Error
// Handling reserves -32602 for an "Invalid or nonexistent taskId". A
// cancel of a task the caller may see that the server will not honour (the
// operation is PENDING: it may be on the wire) is acknowledged, withdraws
// nothing, and says so and why in the acknowledgement's _meta; the task
// keeps working towards its real outcome.
func TestACancelTheServerWillNotHonourIsAcknowledgedAndWithdrawsNothing(t *testing.T) {
	w := newTaskWorld(t)
	id := w.pendingTask(t, "op-cancel-kept-0001")

	reply := w.post(t, "2026-07-28", tasks.MethodCancel, map[string]any{"taskId": id}, true)
	require.Nil(t, reply["error"], "a known, visible task is not an invalid or nonexistent taskId: %v", reply)
	res := reply["result"].(map[string]any)
	assert.Equal(t, "complete", res["resultType"])
	meta, _ := res["_meta"].(map[string]any)
	decision, _ := meta[tasks.MetaCancel].(map[string]any)
	require.NotNil(t, decision, "the acknowledgement says what was decided: %v", res)
	assert.Equal(t, false, decision["withdrawn"])
	assert.Equal(t, "PENDING", decision["state"])
	assert.Contains(t, decision["reason"], "may already have reached the provider")
	delete(res, "_meta")
	assert.Equal(t, map[string]any{"resultType": "complete"}, res, "otherwise an empty result")

	got := w.post(t, "2026-07-28", tasks.MethodGet, map[string]any{"taskId": id}, true)
	require.Nil(t, got["error"], "%v", got)
	assert.Equal(t, "working", got["result"].(map[string]any)["status"], "nothing was withdrawn")
	op, err := w.operation(t, "op-cancel-kept-0001")
	require.NoError(t, err)
	assert.Equal(t, operation.StatePending, op.State)

	// At 2025-11-25 a cancel's answer is the task, which must be cancelled
	// by then, so a cancel not honoured stays that revision's -32602.
	v1 := w.post(t, "2025-11-25", tasks.MethodCancel, map[string]any{"taskId": id}, false)
	e, _ := v1["error"].(map[string]any)
	require.NotNil(t, e, "%v", v1)
	assert.Equal(t, float64(-32602), e["code"])
	assert.Equal(t, "PENDING", e["data"].(map[string]any)["state"])
}
