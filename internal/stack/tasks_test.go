package stack_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/sim/riskapi"
	"github.com/intentgate/intentgate/internal/stack"
	"github.com/intentgate/intentgate/internal/tools/release"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// These tests speak raw JSON-RPC: go-sdk v1.8's client has no Tasks, and
// the wire is what other clients see.

const tasksExtension = "io.modelcontextprotocol/tasks"

// The stack gives its replicas one task id key; these tests name it anyway.
var taskKeyEnv = map[string]string{"INTENTGATE_TASK_ID_KEY": strings.Repeat("k", 40)}

type rpcReply struct {
	status int
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// rpc sends one 2026-07-28 request; optIn puts the Tasks extension in the
// request's own client capabilities.
func rpc(t *testing.T, url, token, method, name string, params map[string]any, optIn bool) rpcReply {
	t.Helper()
	caps := map[string]any{}
	if optIn {
		caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    protocolNew,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-tasks-client", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, url, strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", protocolNew)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r rpcReply
	require.NoError(t, json.Unmarshal(data, &r), "body %s", data)
	r.status = resp.StatusCode
	return r
}

type wireTask struct {
	ResultType     string         `json:"resultType"`
	TaskID         string         `json:"taskId"`
	Status         string         `json:"status"`
	StatusMessage  string         `json:"statusMessage"`
	CreatedAt      string         `json:"createdAt"`
	LastUpdatedAt  string         `json:"lastUpdatedAt"`
	TTLMs          *int64         `json:"ttlMs"`
	PollIntervalMs int64          `json:"pollIntervalMs"`
	Result         map[string]any `json:"result"`
}

func decodeTask(t *testing.T, r rpcReply) wireTask {
	t.Helper()
	require.Nil(t, r.Error, "%+v", r.Error)
	var task wireTask
	require.NoError(t, json.Unmarshal(r.Result, &task), "%s", r.Result)
	return task
}

// cancelDecision reads a 2026-07-28 tasks/cancel answer: an empty result
// acknowledging the cancel, whose _meta says what the server decided
// (withdrawn, state, reason).
func cancelDecision(t *testing.T, r rpcReply) map[string]any {
	t.Helper()
	require.Nil(t, r.Error, "a cancel of a visible task is acknowledged: %+v", r.Error)
	var ack struct {
		ResultType string                    `json:"resultType"`
		Meta       map[string]map[string]any `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &ack), "%s", r.Result)
	require.Equal(t, "complete", ack.ResultType)
	decision := ack.Meta["io.github.intentgate/cancel"]
	require.NotNil(t, decision, "%s", r.Result)
	return decision
}

func getTask(t *testing.T, url, token, taskID string) rpcReply {
	t.Helper()
	return rpc(t, url, token, "tasks/get", taskID, map[string]any{"taskId": taskID}, true)
}

func TestServerAdvertisesTasksAndWriteToolsDeclareTaskSupport(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	tok := h.token(t, "ALICE")
	disc := rpc(t, h.MCPURLs[0], tok, "server/discover", "", nil, false)
	require.Nil(t, disc.Error)
	var d struct {
		Capabilities struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(disc.Result, &d), "%s", disc.Result)
	assert.Contains(t, d.Capabilities.Extensions, tasksExtension)

	list := rpc(t, h.MCPURLs[0], tok, "tools/list", "", nil, false)
	require.Nil(t, list.Error)
	var l struct {
		Tools []struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(list.Result, &l))
	support := map[string]bool{}
	for _, tool := range l.Tools {
		_, support[tool.Name] = tool.Meta[tasksExtension]
	}
	assert.True(t, support[riskreview.ToolRequest], "a write tool declares task support")
	assert.False(t, support[riskreview.ToolStatus], "a read tool does not")
}

func TestWithoutTheTaskKeyTheExtensionIsOff(t *testing.T) {
	h := startStack(t, 1, map[string]string{"INTENTGATE_TASK_ID_KEY": ""})
	disc := rpc(t, h.MCPURLs[0], h.token(t, "ALICE"), "server/discover", "", nil, false)
	require.Nil(t, disc.Error)
	assert.NotContains(t, string(disc.Result), tasksExtension)
}

// Item: a dropped response is answered with a task, polled on a different
// replica until completed with the verified result.
func TestDroppedResponseIsATaskCompletedOnAnotherReplica(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 2, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")

	created := rpc(t, h.MCPURLs[0], tok, "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728041", "dropped", "op-task-drop-01")}, true)
	task := decodeTask(t, created)
	assert.Equal(t, "task", task.ResultType)
	assert.Equal(t, "working", task.Status)
	assert.Contains(t, task.StatusMessage, "UNKNOWN")
	assert.Regexp(t, `^tsk_[a-z2-7]{26}_[a-z2-7]{13}_[a-z2-7]{26}$`, task.TaskID)
	assert.Positive(t, task.PollIntervalMs)
	assert.Nil(t, task.TTLMs, "an operation in flight is kept without limit")

	// Durable before the handle was returned: the other replica knows it.
	polled := decodeTask(t, getTask(t, h.MCPURLs[1], tok, task.TaskID))
	assert.Equal(t, "complete", polled.ResultType)
	assert.Equal(t, "working", polled.Status)
	assert.Equal(t, task.CreatedAt, polled.CreatedAt)

	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)

	done := decodeTask(t, getTask(t, h.MCPURLs[1], tok, task.TaskID))
	require.Equal(t, "completed", done.Status, done.StatusMessage)
	assert.NotEqual(t, true, done.Result["isError"], "a success carries no isError")
	sc, _ := done.Result["structuredContent"].(map[string]any)
	assert.Equal(t, "SUCCEEDED", sc["status"])
	assert.Equal(t, "committed_and_verified", sc["outcome"])
	assert.NotEqual(t, done.CreatedAt, done.LastUpdatedAt)
	assert.Equal(t, 1, h.Risk.Stats().CreateCalls, "polling sends nothing")
	assert.Equal(t, 1, h.Risk.Stats().ReviewsCommitted)
}

func TestRequestThatDidNotOptInIsAnsweredAsToday(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")
	r := rpc(t, h.MCPURLs[0], tok, "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728042", "dropped", "op-task-plain-1")}, false)
	require.Nil(t, r.Error)
	var res struct {
		ResultType        string         `json:"resultType"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &res))
	assert.NotEqual(t, "task", res.ResultType)
	assert.True(t, res.IsError)
	assert.Equal(t, "UNKNOWN", res.StructuredContent["status"])
	assert.Equal(t, "OPERATION_UNKNOWN", res.StructuredContent["code"])
}

func TestSettledCallIsAnsweredWithItsPlainResult(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	r := rpc(t, h.MCPURLs[0], h.token(t, "ALICE"), "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728043", "fine", "op-task-done-1")}, true)
	require.Nil(t, r.Error)
	assert.NotContains(t, string(r.Result), `"resultType":"task"`)
	assert.Contains(t, string(r.Result), `"SUCCEEDED"`)
}

// Item: a foreign tenant's tasks/get is refused exactly like an unknown id.
func TestForeignTenantsTaskIsIndistinguishableFromAnUnknownOne(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	task := decodeTask(t, rpc(t, h.MCPURLs[0], h.token(t, "ALICE"), "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728044", "dropped", "op-task-foreign")}, true))

	bob := h.token(t, "BOB")
	foreign := getTask(t, h.MCPURLs[0], bob, task.TaskID)
	unknown := getTask(t, h.MCPURLs[0], bob, "tsk_"+strings.Repeat("a", 26)+"_"+strings.Repeat("b", 26))
	require.NotNil(t, foreign.Error)
	assert.Equal(t, int64(-32602), foreign.Error.Code)
	assert.Equal(t, unknown.Error, foreign.Error)
	assert.Equal(t, unknown.status, foreign.status)
	for _, m := range []string{"tasks/cancel", "tasks/update"} {
		f := rpc(t, h.MCPURLs[0], bob, m, task.TaskID, map[string]any{"taskId": task.TaskID}, true)
		u := rpc(t, h.MCPURLs[0], bob, m, "tsk_x", map[string]any{"taskId": "tsk_x"}, true)
		assert.Equal(t, u.Error, f.Error, m)
	}
	// The operator may see every operation, hence every task.
	assert.Nil(t, getTask(t, h.MCPURLs[0], h.token(t, "OPERATOR"), task.TaskID).Error)
}

func TestTaskMethodsNeedTheClientCapability(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	r := rpc(t, h.MCPURLs[0], h.token(t, "ALICE"), "tasks/get", "tsk_x", map[string]any{"taskId": "tsk_x"}, false)
	require.NotNil(t, r.Error)
	assert.Equal(t, int64(-32021), r.Error.Code, "%+v", r.Error)
	assert.JSONEq(t, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`, string(r.Error.Data))
}

// downProvider is a provider address nothing listens on: a dispatch to it
// is refused before it leaves (not_dispatched, proven unsent), until serve
// puts the real simulator behind the same address, so whatever a
// reconciler sends afterwards reaches the simulator and is counted.
type downProvider struct{ addr string }

func newDownProvider(t *testing.T) downProvider {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return downProvider{addr: addr}
}

func (d downProvider) url() string { return "http://" + d.addr }

func (d downProvider) serve(t *testing.T, target string) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	l, err := net.Listen("tcp", d.addr)
	require.NoError(t, err)
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(u), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// unsentReleaseEnv is taskKeyEnv with the Release API at down.
func unsentReleaseEnv(down downProvider) map[string]string {
	env := map[string]string{"INTENTGATE_RELEASE_API_URL": down.url()}
	for k, v := range taskKeyEnv {
		env[k] = v
	}
	return env
}

// Item: a request that may have reached the provider is not withdrawn by a
// cancel, which is acknowledged (the extension's cancellation is
// cooperative) and says why: while UNKNOWN (an effect may exist), and
// after an absence the Risk API may still overtake (it deduplicates by our
// key but promises no commit deadline): the re-send under the same key
// settles it, with one review.
func TestATaskThatMayHaveReachedTheProviderIsNotWithdrawnByACancel(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 2, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")
	task := decodeTask(t, rpc(t, h.MCPURLs[0], tok, "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728045", "timeout", "op-task-cancel1")}, true))
	require.Equal(t, "working", task.Status)

	kept := cancelDecision(t, rpc(t, h.MCPURLs[1], tok, "tasks/cancel", task.TaskID, map[string]any{"taskId": task.TaskID}, true))
	assert.Equal(t, false, kept["withdrawn"], "UNKNOWN may have an effect: not withdrawn")
	assert.Equal(t, "UNKNOWN", kept["state"])
	assert.Contains(t, kept["reason"], "an effect may exist")

	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background()) // probe: nothing there yet
	require.NoError(t, err)
	retry := decodeTask(t, getTask(t, h.MCPURLs[1], tok, task.TaskID))
	require.Contains(t, retry.StatusMessage, "RETRYABLE")

	kept = cancelDecision(t, rpc(t, h.MCPURLs[1], tok, "tasks/cancel", task.TaskID, map[string]any{"taskId": task.TaskID}, true))
	assert.Equal(t, false, kept["withdrawn"], "the first create may still commit")
	assert.Equal(t, "RETRYABLE", kept["state"])
	assert.Contains(t, kept["reason"], "may still commit")

	for range 3 {
		clock.Advance(time.Minute)
		_, err = svc.Sweep(context.Background())
		require.NoError(t, err)
	}
	done := decodeTask(t, getTask(t, h.MCPURLs[0], tok, task.TaskID))
	assert.Equal(t, "completed", done.Status)
	assert.Equal(t, 1, h.Risk.Stats().ReviewsCommitted, "one review for the order")
}

// Item: a cancelled unsent operation is never dispatched afterwards.
func TestCancelledUnsentOperationIsNeverSent(t *testing.T) {
	clock := newTestClock()
	down := newDownProvider(t)
	h := startStackWith(t, 2, unsentReleaseEnv(down), stack.Config{Clock: clock.Now})
	tok := h.token(t, "DEPLOYER")
	task := decodeTask(t, rpc(t, h.MCPURLs[0], tok, "tools/call", release.ToolCreate,
		map[string]any{"name": release.ToolCreate, "arguments": ticketArgs("8bc911d", "op-task-cancel1")}, true))
	require.Equal(t, "working", task.Status)
	retry := decodeTask(t, getTask(t, h.MCPURLs[1], tok, task.TaskID))
	require.Contains(t, retry.StatusMessage, "RETRYABLE", "the connection was refused: proven unsent")

	ack := rpc(t, h.MCPURLs[1], tok, "tasks/cancel", task.TaskID, map[string]any{"taskId": task.TaskID}, true)
	require.Nil(t, ack.Error, "%+v", ack.Error)
	var ackBody map[string]any
	require.NoError(t, json.Unmarshal(ack.Result, &ackBody))
	assert.Equal(t, "complete", ackBody["resultType"])
	delete(ackBody, "_meta")
	assert.Equal(t, map[string]any{"resultType": "complete"}, ackBody, "an empty acknowledgement")
	again := rpc(t, h.MCPURLs[0], tok, "tasks/cancel", task.TaskID, map[string]any{"taskId": task.TaskID}, true)
	assert.Nil(t, again.Error, "cancelling twice acknowledges twice")

	down.serve(t, h.ReleaseURL) // from now on a re-send would reach the provider
	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	for range 3 {
		clock.Advance(time.Minute)
		_, err = svc.Sweep(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, 0, h.Release.Stats().CreateCalls, "no reconciler sent the cancelled operation")
	assert.Empty(t, h.Release.Stats().TicketsByTarget)
	cancelled := decodeTask(t, getTask(t, h.MCPURLs[0], tok, task.TaskID))
	assert.Equal(t, "cancelled", cancelled.Status)
	require.NotNil(t, cancelled.TTLMs, "a FAILED operation expires after retention")
	assert.Positive(t, *cancelled.TTLMs)

	// Nothing is outstanding, so the extension's rule is to acknowledge and
	// ignore the responses: the task stays as it was.
	upd := rpc(t, h.MCPURLs[0], tok, "tasks/update", task.TaskID, map[string]any{"taskId": task.TaskID, "inputResponses": map[string]any{}}, true)
	require.Nil(t, upd.Error, "%+v", upd.Error)
	after := decodeTask(t, getTask(t, h.MCPURLs[1], tok, task.TaskID))
	assert.Equal(t, "cancelled", after.Status)
}

// A call deduplicated onto another key's operation, answered plainly and
// through its task (2026-07-28 tasks/get, 2025-11-25 tasks/result): the
// task's result is what a replay of that call returns, deduplicated and
// saying so, because its task id is its own key's.
func TestDeduplicatedCallsTaskResultIsWhatItsReplayReturns(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 1, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")
	url := h.MCPURLs[0]

	// The holder: its answer dropped, UNKNOWN, answered with its task.
	holderCall := map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728049", "holder", "op-dedup-holder-1")}
	holder := decodeTask(t, rpc(t, url, tok, "tools/call", riskreview.ToolRequest, holderCall, true))
	require.Equal(t, "task", holder.ResultType)

	// The same order under other keys: deduplicated onto the holder,
	// answered with tasks (2026-07-28 and 2025-11-25).
	dedupCall := map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728049", "holder", "op-dedup-1")}
	created := decodeTask(t, rpc(t, url, tok, "tools/call", riskreview.ToolRequest, dedupCall, true))
	require.Equal(t, "task", created.ResultType)
	assert.NotEqual(t, holder.TaskID, created.TaskID, "each key names its own task")
	v1 := callAsTaskV1(t, url, tok, reviewArgs("O20260728049", "holder", "op-dedup-2"))

	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)

	structured := func(raw json.RawMessage) map[string]any {
		var r struct {
			StructuredContent map[string]any `json:"structuredContent"`
		}
		require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
		return r.StructuredContent
	}
	replay := rpc(t, url, tok, "tools/call", riskreview.ToolRequest, dedupCall, false)
	require.Nil(t, replay.Error)
	want := structured(replay.Result)
	require.Equal(t, true, want["deduplicated"])

	done := decodeTask(t, getTask(t, url, tok, created.TaskID))
	require.Equal(t, "completed", done.Status)
	assert.Equal(t, want, done.Result["structuredContent"], "2026-07-28 task result is the replay")

	v1res := rpcV1(t, url, tok, "tasks/result", map[string]any{"taskId": v1.TaskID})
	require.Nil(t, v1res.Error)
	v1replay := rpc(t, url, tok, "tools/call", riskreview.ToolRequest,
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728049", "holder", "op-dedup-2")}, false)
	require.Nil(t, v1replay.Error)
	assert.Equal(t, structured(v1replay.Result), structured(v1res.Result), "2025-11-25 tasks/result is the replay")

	// The holder's task, and any id handed out before ids were per key,
	// still reads as the holder's own call.
	own := decodeTask(t, getTask(t, url, tok, holder.TaskID))
	require.Equal(t, "completed", own.Status)
	assert.Equal(t, false, own.Result["structuredContent"].(map[string]any)["deduplicated"])
}
