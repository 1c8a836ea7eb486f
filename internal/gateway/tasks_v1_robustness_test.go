package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A 2025-11-25 task-augmented call whose insert answer was lost is answered
// with the task of its key only when the key was recorded for the same
// arguments: a call reusing an operation_id with other arguments (which
// the plain path answers IDEMPOTENCY_CONFLICT) must not be handed the
// earlier intent's task, completed, as if its own had succeeded.
func TestAnOlderClientsConflictingCallWhoseInsertAnswerIsLostIsNotGivenAnotherIntentsTask(t *testing.T) {
	w := newTaskWorld(t)

	// 1. operation_id op-conflict-lost-1 refunds charge A; it settles.
	first := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", map[string]any{
		"name": "issue_refund", "task": map[string]any{},
		"arguments": map[string]any{"charge_id": "ch_AAAA", "operation_id": "op-conflict-lost-1"}}, false))
	require.Equal(t, "completed", first["status"])
	require.Equal(t, int32(1), w.refund.sent.Load())

	// 2. The same operation_id with OTHER arguments (charge B); the insert
	//    (cancelled: the key is taken with another digest) loses its answer.
	w.lossy.action, w.lossy.applied = "TransactWriteItems", true
	reply := w.post(t, "2025-11-25", "tools/call", map[string]any{
		"name": "issue_refund", "task": map[string]any{},
		"arguments": map[string]any{"charge_id": "ch_BBBB", "operation_id": "op-conflict-lost-1"}}, false)
	require.Positive(t, w.lossy.lost.Load())

	// Whatever the answer is, it must not be charge A's completed task:
	// that tells the caller its refund of B is done, and tasks/result hands
	// it A's success.
	if res, ok := reply["result"].(map[string]any); ok {
		task, _ := res["task"].(map[string]any)
		require.NotNil(t, task, "%v", reply)
		assert.NotEqual(t, first["taskId"], task["taskId"],
			"a call with other arguments under a taken operation_id was answered with the task of the earlier intent (status %v)", task["status"])
		assert.NotEqual(t, "completed", task["status"], "the other intent's task is reported completed")
		// Nor may its result be charge A's success.
		w.lossy.action = "Unset"
		got := w.post(t, "2025-11-25", "tasks/result", map[string]any{"taskId": task["taskId"]}, false)
		if r, ok := got["result"].(map[string]any); ok {
			assert.Equal(t, true, r["isError"],
				"tasks/result answers the charge-B call with charge A's success: %v", r["structuredContent"])
		}
	}
	// Called again, as the answer says, the key taken by other arguments
	// is refused.
	w.lossy.action = "Unset"
	again := w.post(t, "2025-11-25", "tools/call", map[string]any{
		"name": "issue_refund", "task": map[string]any{},
		"arguments": map[string]any{"charge_id": "ch_BBBB", "operation_id": "op-conflict-lost-1"}}, false)
	refusal, _ := again["error"].(map[string]any)
	require.NotNil(t, refusal, "%v", again)
	assert.Contains(t, fmt.Sprint(refusal["data"]), "IDEMPOTENCY_CONFLICT", "%v", refusal)
	assert.Equal(t, int32(1), w.refund.sent.Load())
}

// A 2025-11-25 tasks/get, tasks/cancel or tasks/result without params (or
// with "params": null) is refused. The SDK runs method handlers on a
// goroutine of its own and recovers nothing, so a handler that panics on
// it ends the whole process and every request in flight on the replica,
// writes among them. The server runs in a child process here, so a crash
// is observed, not suffered, by the test binary.
func TestATaskMethodWithoutParamsIsRefusedAndTheReplicaServesOn(t *testing.T) {
	if os.Getenv("INTENTGATE_TEST_CHILD_BODY") != "" {
		w := newTaskWorld(t)
		req, err := http.NewRequest(http.MethodPost, w.url, strings.NewReader(os.Getenv("INTENTGATE_TEST_CHILD_RAW")))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		var answer struct {
			Error *struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(data, &answer), "%s", data)
		require.NotNil(t, answer.Error, "a request naming no task is refused: %s", data)
		assert.Equal(t, int64(-32602), answer.Error.Code, "%s", data)
		// The replica still serves the next request.
		reply := w.post(t, "2025-11-25", "tools/call", refundCall("op-after-crash-1", false), false)
		require.Nil(t, reply["error"], "%v", reply)
		return
	}
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/result"}`,
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestATaskMethodWithoutParamsIsRefusedAndTheReplicaServesOn$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "INTENTGATE_TEST_CHILD_BODY=1", "INTENTGATE_TEST_CHILD_RAW="+raw)
		out, err := cmd.CombinedOutput()
		if err != nil {
			lines := strings.Split(string(out), "\n")
			for i, l := range lines {
				if strings.HasPrefix(l, "panic:") {
					end := min(i+8, len(lines))
					t.Errorf("%s: the server process died: %v\n%s", raw, err, strings.Join(lines[i:end], "\n"))
					break
				}
			}
			if !strings.Contains(string(out), "panic:") {
				t.Errorf("%s: child failed: %v\n%s", raw, err, out)
			}
		}
	}
}
