package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/store"
	"github.com/intentgate/intentgate/internal/tools"
)

// The experimental Tasks of protocol 2025-11-25, for older clients: the
// same operations, the same mapping, that revision's shapes. The client
// asks per call (tools/call's "task" parameter, which go-sdk drops when it
// decodes the params, so it is read from the raw request the boundary
// kept); the capability is announced in initialize and each write tool's
// support in tools/list (execution.taskSupport).

// ProtocolV1 is the protocol revision whose experimental Tasks are served.
const ProtocolV1 = "2025-11-25"

// MethodResult is 2025-11-25's tasks/result.
const MethodResult = "tasks/result"

// metaRelatedTask names the task a tasks/result answer belongs to.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// codeRefused answers a task-augmented call the tool refused before any
// operation existed: there is no task to return (JSON-RPC's
// implementation-defined server error range).
const codeRefused = -32000

// TaskV1 is the 2025-11-25 Task.
type TaskV1 struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is the actual retention in ms, null while kept without limit.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// CreateTaskResultV1 answers a task-augmented tools/call.
type CreateTaskResultV1 struct {
	mcp.ResultBase
	Task TaskV1 `json:"task"`
}

// TaskResultV1 answers tasks/get and tasks/cancel: the task itself.
type TaskResultV1 struct {
	mcp.ResultBase
	TaskV1
}

// viewV1 is t in 2025-11-25's vocabulary. That revision ends a tool call
// whose result is an error in "failed"; a terminal status never changes,
// so it follows how the operation first settled (an operation that
// succeeded and was escalated later stays completed).
func viewV1(t Task, op operation.Operation) TaskV1 {
	v := TaskV1{TaskID: t.TaskID, Status: string(t.Status), StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTL: t.TTLMs, PollInterval: t.PollIntervalMs}
	if t.Status == StatusCompleted && firstSettled(op) == operation.StateFailed {
		v.Status = "failed"
	}
	return v
}

// firstSettled is the state the operation first settled in.
func firstSettled(op operation.Operation) operation.State {
	for _, ev := range op.Journal {
		if ev.To.Settled() {
			return ev.To
		}
	}
	return op.State
}

// isV1 reports whether the request being served is a 2025-11-25 one.
func isV1(ctx context.Context, session mcp.Session) bool {
	return revision(ctx, session) == ProtocolV1
}

// revision is the protocol revision of the request being served: the
// version its _meta names (2026-07-28 clients send one per request) or,
// naming none, its session's (under the stateless transport from the
// MCP-Protocol-Version header; the SDK takes an absent one for
// 2025-03-26). "" if neither is known. Members are read by their exact
// names, as the SDK reads them: "_META" names nothing.
func revision(ctx context.Context, session mcp.Session) string {
	if v, ok := mcpserver.ProtocolVersionMeta(mcpserver.RequestParams(ctx)); ok {
		return v
	}
	ss, ok := session.(*mcp.ServerSession)
	if !ok || ss == nil {
		return ""
	}
	if init := ss.InitializeParams(); init != nil {
		return init.ProtocolVersion
	}
	return ""
}

// taskRequested reports whether the raw tools/call params ask for a task
// (a "task" member that is not null; "Task" is not one), with the tool
// named and the member as sent.
func taskRequested(ctx context.Context) (tool string, task json.RawMessage, ok bool) {
	raw := mcpserver.RequestParams(ctx)
	task, ok = mcpserver.ParamsMember(raw, "task")
	if !ok || string(task) == "null" {
		return "", nil, false
	}
	if name, ok := mcpserver.ParamsMember(raw, "name"); ok {
		_ = json.Unmarshal(name, &tool)
	}
	return tool, task, true
}

// checkTaskMetadata refuses a "task" that is not 2025-11-25's TaskMetadata
// (an object whose ttl, if present, is an integer: the revision's JSON
// schema), before anything is recorded or sent: a malformed request is
// not a task request, and not a plain one either.
func checkTaskMetadata(task json.RawMessage) error {
	refuse := func(why string) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "Invalid params: task must be a TaskMetadata object ({\"ttl\"?: integer milliseconds}); " + why + "; nothing was recorded or sent"}
	}
	var members map[string]json.RawMessage
	if len(task) == 0 || task[0] != '{' || json.Unmarshal(task, &members) != nil {
		return refuse("it is not an object")
	}
	ttl, ok := members["ttl"]
	if !ok {
		return nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(ttl))
	dec.UseNumber()
	if dec.Decode(&n) != nil || !isInteger(n) {
		return refuse("its ttl is not an integer")
	}
	return nil
}

// isInteger reports whether n is a JSON number without a fractional part
// (JSON Schema's integer: 60000 and 6e4 are, 1.5 is not).
func isInteger(n json.Number) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// callV1 answers a task-augmented 2025-11-25 tools/call: every accepted
// call gets a task (that revision wants one for every accepted request,
// also one that settled within the call); a refusal before any operation
// exists is an error carrying the tool's refusal. An insert whose answer
// was lost may have recorded the operation, which is then sent: it gets
// the task of the caller's key (unknownV1), never the refusal.
func (s *Service) callV1(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request, tool string) (mcp.Result, error) {
	if !s.Supports(tool) {
		return nil, errNoTaskSupport() // the request boundary answers it first (refuseCall)
	}
	sl := &slot{}
	res, err := next(context.WithValue(ctx, slotKey{}, sl), method, req)
	if err != nil {
		return res, err
	}
	if sl.sub == nil {
		return nil, refusedWithoutTask(res)
	}
	if sl.sub.Operation.Handle == "" {
		return s.unknownV1(ctx, *sl.sub), nil
	}
	op := sl.sub.Operation
	c, _ := s.cfg.Caller(ctx)
	t, err := s.view(c, op, s.TaskID(*sl.sub))
	if err != nil {
		return res, nil // the tool's own answer is true; losing it is worse
	}
	return &CreateTaskResultV1{Task: viewV1(t, op)}, nil
}

// unknownV1 is the task of a key whose insert's answer was lost: the task
// as the table has it if the key records this call's arguments, else a
// working task that says the outcome is unknown and how to learn it (as
// the plain call says; called again, a key taken by other arguments is
// refused IDEMPOTENCY_CONFLICT, never answered with the other intent's
// task). Its id names the operation the lost insert would have recorded
// (sub.AttemptedAt), so tasks/get resolves exactly when that insert
// applied, and answers "not found" when it did not. (A lost binding, which
// answers the key with another key's operation, is not named by it: that
// task stays unknown.)
func (s *Service) unknownV1(ctx context.Context, sub tools.Submission) *CreateTaskResultV1 {
	key := sub.Key
	taskID := s.cfg.IDs.For(key.Handle(), sub.AttemptedAt)
	if c, ok := s.cfg.Caller(ctx); ok && s.recordsThisCall(ctx, sub) {
		if op, err := s.lookup(ctx, c, key.Handle()); err == nil {
			// Recorded: the task of the operation the key resolves to.
			taskID = s.cfg.IDs.For(key.Handle(), op.CreatedAt)
			if t, err := s.view(c, op, taskID); err == nil {
				return &CreateTaskResultV1{Task: viewV1(t, op)}
			}
		}
	}
	tm := s.timing()
	now := stamp(tm.Now)
	// If it was recorded it stays PENDING until its lease ends, when the
	// reconciler takes it over.
	poll := min(max(s.cfg.Executor.Lease(), tm.MinPoll), tm.MaxPoll)
	return &CreateTaskResultV1{Task: TaskV1{TaskID: taskID, Status: string(StatusWorking), CreatedAt: now, LastUpdatedAt: now,
		PollInterval: poll.Milliseconds(),
		StatusMessage: "the outcome is unknown: the answer to recording this call was lost, so the operation may have been recorded " +
			"(then the server sends it, once) or not; call again with the same operation_id (never a new one): " +
			"that records it once, or answers with the operation that was recorded and its task"}}
}

// recordsThisCall reports whether sub's key is recorded for sub's own
// arguments (its operation, or a binding made by the same digest).
func (s *Service) recordsThisCall(ctx context.Context, sub tools.Submission) bool {
	rec, err := s.cfg.Executor.Recorded(ctx, sub.Key, sub.Digest)
	return err == nil && rec.Kind == store.Replay
}

// errNoTaskSupport: a task asked of a tool that does not support tasks.
func errNoTaskSupport() *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
		Message: "this tool does not support task-augmented execution (execution.taskSupport is absent); call it without \"task\""}
}

// refusedWithoutTask turns the tool's refusal into the JSON-RPC error a
// task-augmented call gets when no task was created, its structured
// refusal (code, retry_allowed, next_action) whole in data.
func refusedWithoutTask(res mcp.Result) error {
	msg := "the call was refused and no task was created"
	var data json.RawMessage
	if r, ok := res.(*mcp.CallToolResult); ok && r.StructuredContent != nil {
		if raw, err := json.Marshal(r.StructuredContent); err == nil {
			data = raw
			var refusal struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(raw, &refusal) == nil && refusal.Message != "" {
				msg += ": " + refusal.Message
			}
		}
	}
	return &jsonrpc.Error{Code: codeRefused, Message: msg, Data: data}
}

// getV1 is 2025-11-25's tasks/get.
func (s *Service) getV1(ctx context.Context, taskID string) (*TaskResultV1, error) {
	c, op, err := s.find(ctx, taskID)
	if err != nil {
		return nil, err
	}
	t, err := s.view(c, op, taskID)
	if err != nil {
		return nil, err
	}
	return &TaskResultV1{TaskV1: viewV1(t, op)}, nil
}

// cancelV1 is 2025-11-25's tasks/cancel: that revision refuses to cancel a
// terminal task (-32602), and its answer to a cancel is the task, which
// "MUST" be cancelled by then, so a cancel that withdraws nothing is
// refused too (refusalV1). A caller who may not withdraw the operation is
// told that first, as at 2026-07-28.
func (s *Service) cancelV1(ctx context.Context, taskID string) (*TaskResultV1, error) {
	c, op, err := s.find(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if _, ok := mayWithdraw(c, op); ok && Final(op) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task is already terminal and cannot be cancelled"}
	}
	d, err := s.decideCancel(ctx, c, op)
	if err != nil {
		return nil, err
	}
	if !d.Withdrawn {
		return nil, refusalV1(d)
	}
	return s.getV1(ctx, taskID)
}

// Result is 2025-11-25's tasks/result: the tool's CallToolResult for the
// operation once the task is terminal (what a replay of the call returns),
// naming its task. On a task still working it waits, polling the table at
// the task's own interval, for at most ResultWait and never past the
// request's own budget (its deadline less the reserve to write the
// answer): a function cannot hold a request beyond its timeout, so after
// that it answers an error that says to ask again (or poll tasks/get).
func (s *Service) Result(ctx context.Context, taskID string) (*mcp.CallToolResult, error) {
	start := time.Now()
	deadline := start.Add(min(s.cfg.ResultWait, s.cfg.Executor.Budget().Remaining(ctx)))
	for {
		c, op, err := s.find(ctx, taskID)
		if err != nil {
			return nil, err
		}
		if Final(op) {
			res := s.render(c, op, taskID)
			res.Meta = mcp.Meta{metaRelatedTask: map[string]any{"taskId": taskID}}
			return res, nil
		}
		pause := min(nextLook(op, s.timing()), time.Until(deadline))
		if pause > 0 {
			timer := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request ended before the task did; call tasks/result again"}
			case <-timer.C:
			}
		}
		// At the end of the wait the answer is written, not another read
		// started: what is left of the budget is the reserve for it.
		if time.Until(deadline) <= 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: "the task is still working (" + string(op.State) + ") after waiting " + time.Since(start).Round(time.Millisecond).String() +
					"; call tasks/result again or poll tasks/get"}
		}
	}
}

// capabilitiesV1 is what 2025-11-25's initialize announces: task-augmented
// tools/call and tasks/cancel. No tasks/list: a task is found by its id.
var capabilitiesV1 = map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}

// initializeResultV1 is the SDK's InitializeResult with capabilities.tasks,
// which its ServerCapabilities has no field for.
type initializeResultV1 struct {
	mcp.ResultBase
	Capabilities    map[string]any      `json:"capabilities"`
	Instructions    string              `json:"instructions,omitempty"`
	ProtocolVersion string              `json:"protocolVersion"`
	ServerInfo      *mcp.Implementation `json:"serverInfo"`
}

// initializeV1 answers initialize, which only revisions before 2026-07-28
// have: none of them defines the Tasks extension, so it is not named
// there (server/discover names it), and 2025-11-25 gets its own
// capabilities.tasks instead (earlier revisions have no tasks).
func initializeV1(res mcp.Result) (mcp.Result, error) {
	ir, ok := res.(*mcp.InitializeResult)
	if !ok {
		return res, nil
	}
	if ir.Capabilities != nil && ir.Capabilities.Extensions[Extension] != nil {
		// A copy: the SDK may hand out the server's own capabilities.
		withoutTasks := *ir.Capabilities
		withoutTasks.Extensions = maps.Clone(ir.Capabilities.Extensions)
		delete(withoutTasks.Extensions, Extension)
		if len(withoutTasks.Extensions) == 0 {
			withoutTasks.Extensions = nil
		}
		plain := *ir
		plain.Capabilities = &withoutTasks
		ir = &plain
	}
	if ir.ProtocolVersion != ProtocolV1 {
		return ir, nil
	}
	raw, err := json.Marshal(ir.Capabilities)
	if err != nil {
		return nil, err
	}
	caps := map[string]any{}
	if err := json.Unmarshal(raw, &caps); err != nil {
		return nil, err
	}
	caps["tasks"] = capabilitiesV1
	return &initializeResultV1{ResultBase: mcp.ResultBase{Meta: ir.Meta}, Capabilities: caps,
		Instructions: ir.Instructions, ProtocolVersion: ir.ProtocolVersion, ServerInfo: ir.ServerInfo}, nil
}

// listToolsResultV1 is tools/list with each write tool's
// execution.taskSupport, which the SDK's Tool has no field for.
type listToolsResultV1 struct {
	mcp.ResultBase
	NextCursor string            `json:"nextCursor,omitempty"`
	Tools      []json.RawMessage `json:"tools"`
}

func (s *Service) listToolsV1(res mcp.Result) (mcp.Result, error) {
	lr, ok := res.(*mcp.ListToolsResult)
	if !ok {
		return res, nil
	}
	out := &listToolsResultV1{ResultBase: mcp.ResultBase{Meta: lr.Meta}, NextCursor: lr.NextCursor, Tools: make([]json.RawMessage, 0, len(lr.Tools))}
	for _, tool := range lr.Tools {
		raw, err := json.Marshal(tool)
		if err != nil {
			return nil, err
		}
		if s.Supports(tool.Name) {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(raw, &fields); err != nil {
				return nil, err
			}
			fields["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
			if raw, err = json.Marshal(fields); err != nil {
				return nil, err
			}
		}
		out.Tools = append(out.Tools, raw)
	}
	return out, nil
}
