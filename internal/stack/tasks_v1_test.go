package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// The experimental Tasks of protocol 2025-11-25: negotiated in initialize,
// requested per call by the tools/call "task" parameter, served from the
// same operation table with the same mapping.

const protocolTasksV1 = "2025-11-25"

// rpcV1 sends one request as a 2025-11-25 client does after initialize:
// the version in the MCP-Protocol-Version header, no per-request _meta.
func rpcV1(t *testing.T, url, token, method string, params map[string]any) rpcReply {
	t.Helper()
	r, err := postV1(testContext(t), url, token, method, params)
	require.NoError(t, err)
	return r
}

// postV1 is rpcV1 without the test's assertions (safe off the test's goroutine).
func postV1(ctx context.Context, url, token, method string, params map[string]any) (rpcReply, error) {
	if params == nil {
		params = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return rpcReply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return rpcReply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if method != "initialize" {
		req.Header.Set("MCP-Protocol-Version", protocolTasksV1)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rpcReply{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcReply{}, err
	}
	var r rpcReply
	if err := json.Unmarshal(data, &r); err != nil {
		return rpcReply{}, fmt.Errorf("%s: body %s: %w", method, data, err)
	}
	r.status = resp.StatusCode
	return r, nil
}

// taskV1 is the 2025-11-25 Task.
type taskV1 struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func decodeTaskV1(t *testing.T, r rpcReply) taskV1 {
	t.Helper()
	require.Nil(t, r.Error, "%+v", r.Error)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Result, &raw), "%s", r.Result)
	require.Contains(t, raw, "ttl", "ttl is always present (null: kept without limit): %s", r.Result)
	var task taskV1
	require.NoError(t, json.Unmarshal(r.Result, &task), "%s", r.Result)
	return task
}

func callAsTaskV1(t *testing.T, url, token string, args map[string]any) taskV1 {
	t.Helper()
	return callToolAsTaskV1(t, url, token, riskreview.ToolRequest, args)
}

// callToolAsTaskV1 is callAsTaskV1 for any write tool.
func callToolAsTaskV1(t *testing.T, url, token, tool string, args map[string]any) taskV1 {
	t.Helper()
	r := rpcV1(t, url, token, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}})
	require.Nil(t, r.Error, "%+v", r.Error)
	var created struct {
		Task *taskV1 `json:"task"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &created), "%s", r.Result)
	require.NotNil(t, created.Task, "a task-augmented call is answered with CreateTaskResult: %s", r.Result)
	return *created.Task
}

func TestOlderClientsSeeTheTasksCapabilityAndEachWriteToolsTaskSupport(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	tok := h.token(t, "ALICE")
	initialize := func(version string) map[string]any {
		r := rpcV1(t, h.MCPURLs[0], tok, "initialize", map[string]any{
			"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
		require.Nil(t, r.Error, "%+v", r.Error)
		var res struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Capabilities    map[string]any `json:"capabilities"`
		}
		require.NoError(t, json.Unmarshal(r.Result, &res))
		require.Equal(t, version, res.ProtocolVersion)
		return res.Capabilities
	}
	caps := initialize(protocolTasksV1)
	assert.Equal(t, map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}, caps["tasks"],
		"tools/call may be task-augmented and tasks cancelled; no tasks/list (tasks are found by id)")
	assert.Contains(t, caps, "tools", "the other capabilities stay")
	assert.NotContains(t, initialize("2025-06-18"), "tasks", "before 2025-11-25 there are no tasks")

	list := rpcV1(t, h.MCPURLs[0], tok, "tools/list", nil)
	require.Nil(t, list.Error)
	var l struct {
		Tools []struct {
			Name        string         `json:"name"`
			Execution   map[string]any `json:"execution"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(list.Result, &l))
	support := map[string]any{}
	for _, tool := range l.Tools {
		support[tool.Name] = tool.Execution["taskSupport"]
		assert.NotEmpty(t, tool.InputSchema, "%s keeps its schema", tool.Name)
	}
	assert.Equal(t, "optional", support[riskreview.ToolRequest], "a write tool may be called as a task")
	assert.Nil(t, support[riskreview.ToolStatus], "a read tool may not")
}

// The first item at 2025-11-25: a dropped response, polled on
// another replica until completed; tasks/result returns the tool's result.
func TestOlderClientsTaskAugmentedCallCompletesOnAnotherReplica(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 2, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")

	task := callAsTaskV1(t, h.MCPURLs[0], tok, reviewArgs("O20260728036", "dropped", "op-taskv1-drop1"))
	assert.Equal(t, "working", task.Status)
	assert.Contains(t, task.StatusMessage, "UNKNOWN")
	assert.Regexp(t, `^tsk_[a-z2-7]{26}_[a-z2-7]{13}_[a-z2-7]{26}$`, task.TaskID)
	assert.Positive(t, task.PollInterval)
	assert.Nil(t, task.TTL, "kept without limit whatever the client asked for: the actual ttl")

	polled := decodeTaskV1(t, rpcV1(t, h.MCPURLs[1], tok, "tasks/get", map[string]any{"taskId": task.TaskID}))
	assert.Equal(t, "working", polled.Status)
	assert.Equal(t, task.CreatedAt, polled.CreatedAt)

	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)

	done := decodeTaskV1(t, rpcV1(t, h.MCPURLs[1], tok, "tasks/get", map[string]any{"taskId": task.TaskID}))
	require.Equal(t, "completed", done.Status, done.StatusMessage)
	result := rpcV1(t, h.MCPURLs[0], tok, "tasks/result", map[string]any{"taskId": task.TaskID})
	require.Nil(t, result.Error, "%+v", result.Error)
	var res struct {
		Meta              map[string]any `json:"_meta"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Content           []any          `json:"content"`
	}
	require.NoError(t, json.Unmarshal(result.Result, &res), "%s", result.Result)
	assert.False(t, res.IsError)
	assert.NotEmpty(t, res.Content)
	assert.Equal(t, "SUCCEEDED", res.StructuredContent["status"])
	assert.Equal(t, "committed_and_verified", res.StructuredContent["outcome"])
	assert.Equal(t, map[string]any{"taskId": task.TaskID}, res.Meta["io.modelcontextprotocol/related-task"], "tasks/result names its task")
	assert.Equal(t, 1, h.Risk.Stats().CreateCalls, "polling sends nothing")
}

func TestOlderClientsCallWithoutTaskIsAnsweredAsToday(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	r := rpcV1(t, h.MCPURLs[0], h.token(t, "ALICE"), "tools/call",
		map[string]any{"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728037", "dropped", "op-taskv1-plain")})
	require.Nil(t, r.Error)
	var res struct {
		Task              any            `json:"task"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &res))
	assert.Nil(t, res.Task)
	assert.True(t, res.IsError)
	assert.Equal(t, "OPERATION_UNKNOWN", res.StructuredContent["code"])
}

// At 2025-11-25 an accepted task-augmented call always gets a task, also
// when it settles within the call; a refusal before any operation exists
// is a JSON-RPC error carrying the tool's refusal; a tool without task
// support refuses task augmentation.
func TestOlderClientsTaskAugmentedCallsThatSettleOrAreRefused(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	tok := h.token(t, "ALICE")

	settled := callAsTaskV1(t, h.MCPURLs[0], tok, reviewArgs("O20260728038", "fine", "op-taskv1-done1"))
	assert.Equal(t, "completed", settled.Status, settled.StatusMessage)
	assert.Zero(t, settled.PollInterval)

	refused := rpcV1(t, h.MCPURLs[0], h.token(t, "BOB"), "tools/call", map[string]any{
		"name": riskreview.ToolRequest, "arguments": reviewArgs("O20260728039", "not mine", "op-taskv1-bob01"), "task": map[string]any{}})
	require.NotNil(t, refused.Error, "%s", refused.Result)
	assert.Contains(t, refused.Error.Message, "no task was created")
	var data map[string]any
	require.NoError(t, json.Unmarshal(refused.Error.Data, &data))
	assert.Equal(t, "FORBIDDEN", data["code"], "the tool's refusal, whole: %s", refused.Error.Data)

	read := rpcV1(t, h.MCPURLs[0], tok, "tools/call", map[string]any{
		"name": riskreview.ToolStatus, "arguments": map[string]any{"review_id": "op_" + strings.Repeat("a", 26)}, "task": map[string]any{}})
	require.NotNil(t, read.Error)
	assert.Equal(t, int64(-32601), read.Error.Code, "a tool without task support: Method not found")
}

// Cancel at 2025-11-25: refused while the request may have reached the
// provider (UNKNOWN; then RETRYABLE after an absence the Risk API may
// still overtake), with -32602 and the reason.
func TestOlderClientsCannotCancelWhatMayHaveReachedTheProvider(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 2, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateTimeoutBeforeCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")
	task := callAsTaskV1(t, h.MCPURLs[0], tok, reviewArgs("O20260728040", "timeout", "op-taskv1-cncl1"))
	require.Equal(t, "working", task.Status)

	refused := rpcV1(t, h.MCPURLs[1], tok, "tasks/cancel", map[string]any{"taskId": task.TaskID})
	require.NotNil(t, refused.Error, "UNKNOWN may have an effect")
	assert.Equal(t, int64(-32602), refused.Error.Code)
	assert.Contains(t, refused.Error.Message, "an effect may exist")

	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)
	refused = rpcV1(t, h.MCPURLs[1], tok, "tasks/cancel", map[string]any{"taskId": task.TaskID})
	require.NotNil(t, refused.Error, "the first create may still commit")
	assert.Equal(t, int64(-32602), refused.Error.Code)
	assert.Contains(t, refused.Error.Message, "may still commit")
}

// Cancel at 2025-11-25: only while proven unsent; the answer is the
// cancelled task; a terminal task refuses with -32602.
func TestOlderClientsCancelOnlyWhileUnsent(t *testing.T) {
	clock := newTestClock()
	down := newDownProvider(t)
	h := startStackWith(t, 2, unsentReleaseEnv(down), stack.Config{Clock: clock.Now})
	tok := h.token(t, "DEPLOYER")
	task := callToolAsTaskV1(t, h.MCPURLs[0], tok, release.ToolCreate, ticketArgs("8bc911d", "op-taskv1-cncl1"))
	require.Equal(t, "working", task.Status)

	cancelled := decodeTaskV1(t, rpcV1(t, h.MCPURLs[1], tok, "tasks/cancel", map[string]any{"taskId": task.TaskID}))
	assert.Equal(t, task.TaskID, cancelled.TaskID)
	assert.Equal(t, "cancelled", cancelled.Status)
	require.NotNil(t, cancelled.TTL)
	again := rpcV1(t, h.MCPURLs[0], tok, "tasks/cancel", map[string]any{"taskId": task.TaskID})
	require.NotNil(t, again.Error, "a terminal task refuses cancellation at 2025-11-25")
	assert.Equal(t, int64(-32602), again.Error.Code)

	down.serve(t, h.ReleaseURL) // from now on a re-send would reach the provider
	svc, err := h.Apps[1].Reconciler()
	require.NoError(t, err)
	for range 3 {
		clock.Advance(time.Minute)
		_, err = svc.Sweep(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, 0, h.Release.Stats().CreateCalls, "no reconciler sent the cancelled operation")
	assert.Equal(t, "cancelled", decodeTaskV1(t, rpcV1(t, h.MCPURLs[0], tok, "tasks/get", map[string]any{"taskId": task.TaskID})).Status)
}

func TestOlderClientsForeignTaskIsIndistinguishableFromAnUnknownOne(t *testing.T) {
	h := startStack(t, 1, taskKeyEnv)
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	task := callAsTaskV1(t, h.MCPURLs[0], h.token(t, "ALICE"), reviewArgs("O20260728035", "dropped", "op-taskv1-frgn1"))
	bob := h.token(t, "BOB")
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		foreign := rpcV1(t, h.MCPURLs[0], bob, m, map[string]any{"taskId": task.TaskID})
		unknown := rpcV1(t, h.MCPURLs[0], bob, m, map[string]any{"taskId": "tsk_" + strings.Repeat("a", 26) + "_" + strings.Repeat("b", 26)})
		require.NotNil(t, foreign.Error, m)
		assert.Equal(t, int64(-32602), foreign.Error.Code, m)
		assert.Equal(t, unknown.Error, foreign.Error, m)
		assert.Equal(t, unknown.status, foreign.status, m)
	}
}

// tasks/result on a working task waits for it (polling the table) and
// answers once it is terminal; the task is the reconciler's to finish.
func TestOlderClientsTasksResultWaitsForTheTask(t *testing.T) {
	clock := newTestClock()
	h := startStackWith(t, 2, taskKeyEnv, stack.Config{Clock: clock.Now})
	require.NoError(t, h.Risk.SetFaults(riskapi.Faults{Create: []riskapi.CreateFault{{Mode: riskapi.CreateDropResponseAfterCommit, Times: 1}}}))
	tok := h.token(t, "ALICE")
	task := callAsTaskV1(t, h.MCPURLs[0], tok, reviewArgs("O20260728034", "dropped", "op-taskv1-wait1"))
	require.Equal(t, "working", task.Status)

	type reply struct {
		r   rpcReply
		err error
	}
	waited := make(chan reply, 1)
	ctx := testContext(t)
	go func() {
		r, err := postV1(ctx, h.MCPURLs[1], tok, "tasks/result", map[string]any{"taskId": task.TaskID})
		waited <- reply{r, err}
	}()
	svc, err := h.Apps[0].Reconciler()
	require.NoError(t, err)
	clock.Advance(time.Minute)
	_, err = svc.Sweep(context.Background())
	require.NoError(t, err)

	got := <-waited
	require.NoError(t, got.err)
	r := got.r
	require.Nil(t, r.Error, "%+v", r.Error)
	assert.Contains(t, string(r.Result), `"committed_and_verified"`)
	assert.Contains(t, string(r.Result), task.TaskID)

	// tasks/result belongs to 2025-11-25 only.
	v2 := rpc(t, h.MCPURLs[0], tok, "tasks/result", task.TaskID, map[string]any{"taskId": task.TaskID}, true)
	require.NotNil(t, v2.Error)
	assert.Equal(t, int64(-32601), v2.Error.Code)
}
