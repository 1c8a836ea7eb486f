package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/intentgate/intentgate/internal/admission"
	"github.com/intentgate/intentgate/internal/auth"
	"github.com/intentgate/intentgate/internal/enginetest"
	"github.com/intentgate/intentgate/internal/gateway"
	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tasks"
	"github.com/intentgate/intentgate/internal/tools"
)

// lostAnswers loses the engine's answer to requests for action: applied
// (applied) or never sent, the caller sees the same connection reset.
type lostAnswers struct {
	next    dynamodb.HTTPClient
	action  string
	applied bool
	// only, when set, narrows the requests whose answers are lost.
	only func(*http.Request) bool
	// reads: every read of an operation (GetItem) fails too.
	reads bool
	lost  atomic.Int32
}

func (c *lostAnswers) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	if c.reads && strings.HasSuffix(target, ".GetItem") && enginetest.NamesOperation(req) {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	if !strings.HasSuffix(target, "."+c.action) || !enginetest.NamesOperation(req) ||
		(c.only != nil && !c.only(req)) {
		return c.next.Do(req)
	}
	c.lost.Add(1)
	if c.applied {
		resp, err := c.next.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// taskWorld is a gateway with the Tasks extension whose write path may
// lose the insert's answer (lossy), and a task service reading the table
// with a store that does not.
type taskWorld struct {
	url   string
	lossy *lostAnswers
	// taskReads loses answers to the task service's own reads.
	taskReads *lostAnswers
	ex        *tools.Executor
	refund    *refundTool
}

var fiona = auth.Subject{ClientID: "finance-agent", UserID: "fiona", MerchantID: "M1"}

func newTaskWorld(t *testing.T) *taskWorld {
	t.Helper()
	st := engine.NewStore(t)
	budget := admission.BudgetConfig{Auth: time.Second, Store: 2 * time.Second, Downstream: time.Second, Reserve: 100 * time.Millisecond}
	lossyEx, lossy := executorLosing(t, st, budget)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: st, Budget: budget})
	require.NoError(t, err)
	taskEx, taskReads := executorLosing(t, st, budget)

	refund := &refundTool{}
	ids, err := tasks.NewIDs([]byte(strings.Repeat("k", 40)))
	require.NoError(t, err)
	svc, err := tasks.New(tasks.Config{Executor: taskEx, Tools: []tools.Published{refund}, IDs: ids, Caller: gateway.CallerFrom, Retention: time.Hour})
	require.NoError(t, err)
	gate, err := admission.NewGate(admission.GateConfig{MaxInFlight: 2, MaxQueue: 2, MaxWait: time.Second})
	require.NoError(t, err)
	gw, err := gateway.New(gateway.Config{Executor: lossyEx, Writes: []tools.Published{refund}, Gate: gate, Tasks: true})
	require.NoError(t, err)
	h, err := gw.Handler(mcpserver.Config{Name: "test", Version: "0",
		Extensions: []mcpserver.Extension{svc.Extension()}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithSubject(r.Context(), fiona)))
	}))
	t.Cleanup(srv.Close)
	return &taskWorld{url: srv.URL, lossy: lossy, taskReads: taskReads, ex: ex, refund: refund}
}

// executorLosing is an executor on st's table whose store loses the
// answers its lostAnswers is set to lose (none at first).
func executorLosing(t *testing.T, st *store.Store, budget admission.BudgetConfig) (*tools.Executor, *lostAnswers) {
	t.Helper()
	db, err := engine.Client(context.Background())
	require.NoError(t, err)
	lossy := &lostAnswers{action: "Unset"}
	db = dynamodb.New(db.Options(), func(o *dynamodb.Options) { lossy.next = o.HTTPClient; o.HTTPClient = lossy })
	lossyStore, err := store.New(db, store.Config{Table: st.Table()})
	require.NoError(t, err)
	ex, err := tools.NewExecutor(tools.ExecutorConfig{Store: lossyStore, Budget: budget})
	require.NoError(t, err)
	return ex, lossy
}

// post sends one JSON-RPC request at protocol version; at 2026-07-28 the
// version, client info and capabilities go in the request's _meta (optIn
// lists the Tasks extension there), before it in the header only.
func (w *taskWorld) post(t *testing.T, version, method string, params map[string]any, optIn bool) map[string]any {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	caps := map[string]any{}
	if optIn {
		caps["extensions"] = map[string]any{tasks.Extension: map[string]any{}}
	}
	if version >= "2026-07-28" || optIn {
		params["_meta"] = map[string]any{"io.modelcontextprotocol/clientCapabilities": caps}
	}
	if version >= "2026-07-28" {
		meta := params["_meta"].(map[string]any)
		meta["io.modelcontextprotocol/protocolVersion"] = version
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "raw", "version": "1"}
	}
	header := http.Header{}
	header.Set("MCP-Protocol-Version", version)
	if version >= "2026-07-28" {
		header.Set("Mcp-Method", method)
		if name, ok := params["name"].(string); ok {
			header.Set("Mcp-Name", name)
		} else if id, ok := params["taskId"].(string); ok {
			header.Set("Mcp-Name", id)
		}
	}
	_, out := w.postRPC(t, method, params, header)
	return out
}

// postRPC posts one JSON-RPC request with the content negotiation headers
// and exactly the others given, and returns the HTTP status and the
// decoded body.
func (w *taskWorld) postRPC(t *testing.T, method string, params map[string]any, header http.Header) (int, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, w.url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "%s", data)
	return resp.StatusCode, out
}

func refundCall(opID string, task bool) map[string]any {
	p := map[string]any{"name": "issue_refund", "arguments": map[string]any{"charge_id": "ch_" + opID, "operation_id": opID}}
	if task {
		p["task"] = map[string]any{"ttl": 60000}
	}
	return p
}

// pending reads the operation under fiona's key opID, as the reconciler will.
func (w *taskWorld) operation(t *testing.T, opID string) (operation.Operation, error) {
	t.Helper()
	c := tools.Caller{ClientID: fiona.ClientID, UserID: fiona.UserID, TenantID: fiona.MerchantID}
	return w.ex.Find(context.Background(), tools.NewVisibility(w.refund), c, tools.Ref{OperationID: opID})
}

func createdTaskV1(t *testing.T, reply map[string]any) map[string]any {
	t.Helper()
	require.Nil(t, reply["error"], "an operation may exist: the answer is a task, not an error saying none was created")
	res, _ := reply["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	require.NotNil(t, task, "CreateTaskResult: %v", reply)
	return task
}

// The Tasks extension exists from 2026-07-28 on (server/discover names
// it); 2025-11-25 has capabilities.tasks and no extensions member, and
// earlier revisions have no tasks at all. initialize names the extension
// at none of them.
func TestInitializeAtOlderRevisionsDoesNotNameTheTasksExtension(t *testing.T) {
	w := newTaskWorld(t)
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		reply := w.post(t, version, "initialize", map[string]any{"protocolVersion": version,
			"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}, false)
		require.Nil(t, reply["error"], "%s: %v", version, reply)
		caps := reply["result"].(map[string]any)["capabilities"].(map[string]any)
		exts, _ := caps["extensions"].(map[string]any)
		assert.NotContains(t, exts, tasks.Extension, "%s: %v", version, caps)
		_, hasTasks := caps["tasks"]
		assert.Equal(t, version == "2025-11-25", hasTasks, "%s: capabilities.tasks", version)
		assert.Contains(t, caps, "tools")
	}
}

// A 2025-11-25 task-augmented call whose insert applied but whose answer
// was lost is answered with the task of the caller's key, which resolves:
// the operation is PENDING and the reconciler will send it, so "refused,
// no task was created" would be false.
func TestOlderClientsCallWhoseInsertAnswerWasLostGetsTheTaskOfItsKey(t *testing.T) {
	w := newTaskWorld(t)
	w.lossy.action, w.lossy.applied = "TransactWriteItems", true

	task := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", refundCall("op-lost-applied-1", true), false))
	require.Positive(t, w.lossy.lost.Load(), "the insert was sent and its answer lost")
	op, err := w.operation(t, "op-lost-applied-1")
	require.NoError(t, err)
	require.Equal(t, operation.StatePending, op.State)
	assert.Equal(t, "working", task["status"])

	got := w.post(t, "2025-11-25", "tasks/get", map[string]any{"taskId": task["taskId"]}, false)
	require.Nil(t, got["error"], "the task resolves: %v", got)
	assert.Equal(t, task["taskId"], got["result"].(map[string]any)["taskId"])
	assert.Zero(t, w.refund.sent.Load(), "nothing was sent by the call; the reconciler sends it")
}

// The same, when the one read that would tell whether the insert applied
// fails too: the task still names the operation the insert would have
// recorded (its creation time is known before the insert is sent), so
// tasks/get resolves exactly when the insert applied.
func TestOlderClientsTaskOfAnInsertWhoseAnswerAndReadWereLostResolvesOnceRecorded(t *testing.T) {
	w := newTaskWorld(t)
	w.lossy.action, w.lossy.applied = "TransactWriteItems", true
	w.taskReads.reads = true

	task := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", refundCall("op-lost-unread-1", true), false))
	require.Positive(t, w.lossy.lost.Load(), "the insert was sent and its answer lost")
	assert.Equal(t, "working", task["status"])
	assert.Contains(t, task["statusMessage"], "outcome is unknown")
	op, err := w.operation(t, "op-lost-unread-1")
	require.NoError(t, err)
	require.Equal(t, operation.StatePending, op.State, "recorded: the reconciler will send it")

	w.taskReads.reads = false
	got := w.post(t, "2025-11-25", "tasks/get", map[string]any{"taskId": task["taskId"]}, false)
	require.Nil(t, got["error"], "the task of a recorded operation resolves: %v", got)
	assert.Equal(t, task["taskId"], got["result"].(map[string]any)["taskId"])
}

// The same lost answer when the insert never applied: the task says the
// outcome is unknown and to call again with the same key; it names no
// operation (tasks/get finds none), and the same key again records and
// sends the operation once, under the task of that operation.
func TestOlderClientsCallWhoseInsertNeverAppliedIsToldToRetryWithTheSameKey(t *testing.T) {
	w := newTaskWorld(t)
	w.lossy.action = "TransactWriteItems"

	task := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", refundCall("op-lost-unapplied-1", true), false))
	assert.Equal(t, "working", task["status"])
	assert.Contains(t, task["statusMessage"], "outcome is unknown")
	assert.Contains(t, task["statusMessage"], "same operation_id")
	_, err := w.operation(t, "op-lost-unapplied-1")
	var f *tools.Failure
	require.ErrorAs(t, err, &f, "nothing was recorded")

	got := w.post(t, "2025-11-25", "tasks/get", map[string]any{"taskId": task["taskId"]}, false)
	require.NotNil(t, got["error"])
	assert.Equal(t, float64(-32602), got["error"].(map[string]any)["code"])

	w.lossy.action = "Unset"
	again := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", refundCall("op-lost-unapplied-1", true), false))
	assert.NotEqual(t, task["taskId"], again["taskId"], "a task id names one operation, and the first named none")
	assert.Equal(t, "completed", again["status"])
	got = w.post(t, "2025-11-25", "tasks/get", map[string]any{"taskId": again["taskId"]}, false)
	require.Nil(t, got["error"], "%v", got)
	assert.Equal(t, int32(1), w.refund.sent.Load())
}

// A refusal that proves nothing was recorded stays the refusal form.
func TestOlderClientsCallRefusedBeforeAnyInsertIsAnErrorWithoutTask(t *testing.T) {
	w := newTaskWorld(t)
	reply := w.post(t, "2025-11-25", "tools/call", map[string]any{"name": "issue_refund", "task": map[string]any{},
		"arguments": map[string]any{"charge_id": "c", "operation_id": "op-refused-1"}}, false)
	e, _ := reply["error"].(map[string]any)
	require.NotNil(t, e, "%v", reply)
	assert.Equal(t, float64(-32000), e["code"])
}

// At 2026-07-28 a task may only be returned once tasks/get would resolve
// it, which a lost insert answer cannot promise: the opted-in call gets
// the tool's own answer, which says the outcome is unknown and to call
// again with the same key, never that nothing happened.
func TestOptedInCallWhoseInsertAnswerWasLostIsToldTheOutcomeIsUnknown(t *testing.T) {
	w := newTaskWorld(t)
	w.lossy.action, w.lossy.applied = "TransactWriteItems", true

	reply := w.post(t, "2026-07-28", "tools/call", refundCall("op-lost-2026-1", false), true)
	require.Nil(t, reply["error"], "%v", reply)
	res := reply["result"].(map[string]any)
	assert.NotEqual(t, "task", res["resultType"])
	assert.Equal(t, true, res["isError"])
	sc := res["structuredContent"].(map[string]any)
	assert.Equal(t, string(tools.CodeTemporaryUnavailable), sc["code"])
	assert.Equal(t, true, sc["retry_allowed"])
	assert.Contains(t, sc["message"], "outcome is unknown")
	assert.NotContains(t, sc["message"], "nothing was")
	_, err := w.operation(t, "op-lost-2026-1")
	require.NoError(t, err, "it was recorded")
}

// A call deduplicated onto another key's operation whose binding write was
// applied but whose answer was lost gets its own key's task, which
// resolves through the binding to the holder.
func TestOlderClientsDeduplicatedCallWhoseBindingAnswerWasLostGetsItsOwnTask(t *testing.T) {
	w := newTaskWorld(t)
	call := func(opID string) map[string]any {
		return map[string]any{"name": "issue_refund", "task": map[string]any{},
			"arguments": map[string]any{"charge_id": "ch_shared", "operation_id": opID}}
	}
	holder := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", call("op-bind-holder-1"), false))
	require.Equal(t, "completed", holder["status"])

	w.lossy.action, w.lossy.applied, w.lossy.only = "TransactWriteItems", true, enginetest.WritesBinding
	task := createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", call("op-bind-lost-1"), false))
	require.Positive(t, w.lossy.lost.Load(), "the binding was written and its answer lost")
	assert.NotEqual(t, holder["taskId"], task["taskId"], "its own key's task")
	assert.Equal(t, "completed", task["status"], "read from the table: the holder, settled")

	got := w.post(t, "2025-11-25", "tasks/get", map[string]any{"taskId": task["taskId"]}, false)
	require.Nil(t, got["error"], "%v", got)
	assert.Equal(t, "completed", got["result"].(map[string]any)["status"])
	assert.Equal(t, int32(1), w.refund.sent.Load(), "sent once, for the holder")
}

// Tasks came with protocol 2025-11-25 (tasks/get, tasks/result,
// tasks/cancel) and the 2026-07-28 extension (tasks/get, tasks/update,
// tasks/cancel): a request of a revision without the method is answered
// as for any method that revision does not have, -32601, whatever its
// _meta says; never with the extension's -32021.
func TestTasksMethodsAreUnknownAtRevisionsWithoutThem(t *testing.T) {
	w := newTaskWorld(t)
	absent := map[string][]string{
		"2025-03-26": {"tasks/get", "tasks/cancel", "tasks/update", "tasks/result"},
		"2025-06-18": {"tasks/get", "tasks/cancel", "tasks/update", "tasks/result"},
		"2025-11-25": {"tasks/update"},
		"2026-07-28": {"tasks/result"},
	}
	for version, methods := range absent {
		for _, m := range methods {
			for _, optIn := range []bool{false, true} {
				r := w.post(t, version, m, map[string]any{"taskId": "tsk_x"}, optIn)
				e, _ := r["error"].(map[string]any)
				require.NotNil(t, e, "%s %s: %v", version, m, r)
				assert.Equal(t, float64(-32601), e["code"], "%s %s (opted in: %v): %v", version, m, optIn, e)
			}
		}
	}
	// Where the method exists, an unknown id is still "not found".
	for version, methods := range map[string][]string{"2025-11-25": {"tasks/get", "tasks/cancel", "tasks/result"}, "2026-07-28": {"tasks/get", "tasks/cancel", "tasks/update"}} {
		for _, m := range methods {
			e, _ := w.post(t, version, m, map[string]any{"taskId": "tsk_x"}, true)["error"].(map[string]any)
			require.NotNil(t, e, "%s %s", version, m)
			assert.Equal(t, float64(-32602), e["code"], "%s %s: %v", version, m, e)
		}
	}
}

// The per-request opt-in is a 2026-07-28 request's: an older revision's
// tools/call carrying it in _meta is answered as that revision answers it,
// never with the extension's CreateTaskResult.
func TestOlderRevisionsCallCarryingTheOptInIsAnsweredPlainly(t *testing.T) {
	w := newTaskWorld(t)
	// The state write after dispatch is lost: the operation stays PENDING,
	// an outcome that is not final within the call.
	w.lossy.action = "UpdateItem"
	created := w.post(t, "2026-07-28", "tools/call", refundCall("op-optin-2026", false), true)
	require.Nil(t, created["error"], "%v", created)
	require.Equal(t, "task", created["result"].(map[string]any)["resultType"], "the control: 2026-07-28 opted in gets a task")

	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		r := w.post(t, version, "tools/call", refundCall("op-optin-"+version, false), true)
		require.Nil(t, r["error"], "%v", r)
		res := r["result"].(map[string]any)
		assert.NotContains(t, res, "resultType", version)
		assert.NotContains(t, res, "taskId", version)
		assert.Contains(t, res, "structuredContent", "%s: the tool's own result: %v", version, res)
	}
}

// 2025-11-25's CallToolRequest.params.task is a TaskMetadata object
// ({ttl?: integer}). A tools/call whose "task" is anything else (true, a
// string, a number, an array, an object whose ttl is not a number) is
// malformed: -32602 before anything is recorded or sent, neither a task
// nor a plain write.
func TestOlderClientsMalformedTaskParameterIsRefusedAndNothingIsSent(t *testing.T) {
	w := newTaskWorld(t)
	for i, bad := range []any{true, "yes", 0, []any{}, map[string]any{"ttl": "abc"}, map[string]any{"ttl": 1.5}} {
		opID := "op-bad-task-000" + string(rune('a'+i))
		p := refundCall(opID, false)
		p["task"] = bad
		reply := w.post(t, "2025-11-25", "tools/call", p, false)
		e, _ := reply["error"].(map[string]any)
		if assert.NotNil(t, e, "task=%v: %v", bad, reply) {
			assert.Equal(t, float64(-32602), e["code"], "task=%v: %v", bad, e)
		}
		_, err := w.operation(t, opID)
		assert.Error(t, err, "task=%v: nothing recorded", bad)
	}
	assert.Zero(t, w.refund.sent.Load(), "nothing sent")

	// The control: TaskMetadata, with or without ttl, asks for a task.
	for i, good := range []any{map[string]any{}, map[string]any{"ttl": 60000}, map[string]any{"ttl": 6e4, "other": true}} {
		p := refundCall("op-good-task-00"+string(rune('a'+i)), false)
		p["task"] = good
		createdTaskV1(t, w.post(t, "2025-11-25", "tools/call", p, false))
	}
}

// The revision a request is judged at, and whether it asked for a task,
// are read from the params by the members the SDK serves, whose names are
// case-sensitive (the SDK decodes params case-sensitively and checks
// "_meta"'s protocol version against the MCP-Protocol-Version header). A
// 2025-06-18 request whose params carry "_META" naming 2025-11-25 (a member
// the SDK ignores, so its header check never runs) is a 2025-06-18
// request, answered with the tool's own result; a 2025-11-25 call carrying
// "Task" instead of "task" did not ask for a task.
func TestAParamsMemberSpelledInAnotherCaseDoesNotChangeTheRequest(t *testing.T) {
	w := newTaskWorld(t)
	params := refundCall("op-casefold-0001", true)
	params["_META"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2025-11-25"}
	header := http.Header{}
	header.Set("MCP-Protocol-Version", "2025-06-18")
	_, r := w.postRPC(t, "tools/call", params, header)
	require.Nil(t, r["error"], "%v", r)
	res := r["result"].(map[string]any)
	assert.NotContains(t, res, "task", "a 2025-06-18 call answered with 2025-11-25's CreateTaskResult: %v", res)
	assert.Contains(t, res, "structuredContent", "the tool's own result: %v", res)

	params = refundCall("op-casefold-0002", false)
	params["Task"] = map[string]any{"ttl": 60000}
	r = w.post(t, "2025-11-25", "tools/call", params, false)
	require.Nil(t, r["error"], "%v", r)
	res = r["result"].(map[string]any)
	assert.NotContains(t, res, "task", "%v", res)
	assert.Contains(t, res, "structuredContent", "the tool's own result: %v", res)
}
