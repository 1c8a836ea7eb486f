package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/tools"
)

// Method names of the extension.
const (
	MethodGet    = "tasks/get"
	MethodCancel = "tasks/cancel"
	MethodUpdate = "tasks/update"
)

// metaClientCapabilities is where a 2026-07-28 request carries its
// per-request client capabilities.
const metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"

// TaskParams are the params of tasks/get, tasks/cancel and tasks/update.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// InputResponses (tasks/update) are never used here.
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
}

// ToolMeta is what a write tool declares in its _meta: it may answer with
// a task (the server decides per call), and never requires one.
func ToolMeta() map[string]any {
	return map[string]any{Extension: map[string]any{"taskSupport": "optional"}}
}

// Extension is the extension as the MCP server plugs it in: its
// identifier, Install, and the methods whose Mcp-Name header names the
// task ("When tasks/get, tasks/update, or tasks/cancel is sent over the
// Streamable HTTP transport, the client MUST set the Mcp-Name header to
// the value of params.taskId"), which the request boundary checks.
func (s *Service) Extension() mcpserver.Extension {
	return mcpserver.Extension{ID: Extension, Install: s.Install,
		NameParams: map[string]string{MethodGet: "taskId", MethodCancel: "taskId", MethodUpdate: "taskId"},
		RefuseCall: s.refuseCall}
}

// refuseCall refuses, before the SDK, a 2025-11-25 task-augmented call of
// a tool without task support: that revision's answer is -32601, whose
// message the SDK would replace with one saying tools/call does not exist.
func (s *Service) refuseCall(revision string, params json.RawMessage) *jsonrpc.Error {
	if revision != ProtocolV1 {
		return nil
	}
	task, ok := mcpserver.ParamsMember(params, "task")
	if !ok || string(task) == "null" {
		return nil
	}
	if err := checkTaskMetadata(task); err != nil {
		// A malformed task is -32602 whatever the tool, as the
		// middleware answers it.
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return rpcErr
		}
		return nil
	}
	var tool string
	if raw, ok := mcpserver.ParamsMember(params, "name"); !ok || json.Unmarshal(raw, &tool) != nil || s.Supports(tool) {
		return nil
	}
	return errNoTaskSupport()
}

// ProtocolExtension is the first protocol revision the extension is
// defined for: its per-request opt-in and its methods exist from there on.
const ProtocolExtension = "2026-07-28"

// Install plugs the extension into server through go-sdk's extension
// points: a receiving middleware (tools/call, and for 2025-11-25 clients
// initialize and tools/list) and four custom methods. Each method answers
// in the shapes of the request's protocol revision, and as unknown
// (-32601) at a revision that does not have it (methodAt).
func (s *Service) Install(server *mcp.Server) error {
	server.AddReceivingMiddleware(s.middleware)
	if err := mcp.AddReceivingCustomMethod(server, MethodGet, func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (mcp.Result, error) {
		p = paramsOrEmpty(p)
		v1, err := methodAt(ctx, ss, MethodGet)
		if err != nil {
			return nil, err
		}
		if v1 {
			return s.getV1(ctx, p.TaskID)
		}
		if !optedIn(p.GetMeta()) {
			return nil, errMissingCap()
		}
		t, err := s.Get(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		return &GetTaskResult{ResultType: "complete", Task: t}, nil
	}); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodCancel, func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (mcp.Result, error) {
		p = paramsOrEmpty(p)
		v1, err := methodAt(ctx, ss, MethodCancel)
		if err != nil {
			return nil, err
		}
		if v1 {
			return s.cancelV1(ctx, p.TaskID)
		}
		if !optedIn(p.GetMeta()) {
			return nil, errMissingCap()
		}
		d, err := s.Cancel(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		return cancelAck(d), nil
	}); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodUpdate, func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*AckResult, error) {
		p = paramsOrEmpty(p)
		// 2025-11-25 has no tasks/update.
		if rev := revision(ctx, ss); rev < ProtocolExtension {
			return nil, errUnknownMethod(MethodUpdate, rev)
		}
		if !optedIn(p.GetMeta()) {
			return nil, errMissingCap()
		}
		if err := s.Update(ctx, p.TaskID); err != nil {
			return nil, err
		}
		return &AckResult{ResultType: "complete"}, nil
	}); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodResult, func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*mcp.CallToolResult, error) {
		p = paramsOrEmpty(p)
		if rev := revision(ctx, ss); rev != ProtocolV1 {
			return nil, errUnknownMethod(MethodResult, rev)
		}
		return s.Result(ctx, p.TaskID)
	}); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	return nil
}

// paramsOrEmpty: a request without params (or "params": null) reaches a
// method handler as nil; it names no task, and is answered as one naming
// an unknown task is.
func paramsOrEmpty(p *TaskParams) *TaskParams {
	if p == nil {
		return &TaskParams{}
	}
	return p
}

// MetaCancel is the _meta member of a 2026-07-28 tasks/cancel
// acknowledgement that says what the cancel decided: {"withdrawn": bool,
// "state": the operation's state, "reason": why it was not withdrawn}.
// The name is ours (a reverse-DNS prefix outside the reserved ones), since
// the extension's CancelTaskResult is an empty Result whose _meta may
// carry anything.
const MetaCancel = "io.github.intentgate/cancel"

// cancelAck is 2026-07-28's answer to every cancel of a task the caller
// may see, honoured or not: "On success, the server MUST acknowledge the
// request with an empty result", cancellation is cooperative ("A server is
// not obligated to actually stop the work"; the task "MAY ultimately reach
// a terminal status other than cancelled"), and -32602 is for an invalid
// or nonexistent taskId, which a client reads as the task being gone. What
// was decided, and why, goes in _meta.
func cancelAck(d Cancellation) *AckResult {
	decision := map[string]any{"withdrawn": d.Withdrawn, "state": string(d.State)}
	if d.Reason != "" {
		decision["reason"] = d.Reason
	}
	return &AckResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{MetaCancel: decision}}, ResultType: "complete"}
}

// methodAt reports whether the request is a 2025-11-25 one (v1), or that
// method is unknown at its revision. Tasks came with 2025-11-25
// (tasks/get, tasks/result, tasks/list, tasks/cancel: "Tasks were
// introduced in version 2025-11-25") and the 2026-07-28 extension
// ("introduces three methods: tasks/get, tasks/update, and tasks/cancel");
// an earlier revision has none of them, so a request of one is answered
// like any method it lacks, -32601, and its _meta is not read: the
// extension's -32021 and per-request opt-in belong to 2026-07-28.
func methodAt(ctx context.Context, ss *mcp.ServerSession, method string) (v1 bool, err error) {
	switch rev := revision(ctx, ss); {
	case rev == ProtocolV1:
		return true, nil
	case rev >= ProtocolExtension:
		return false, nil
	default:
		return false, errUnknownMethod(method, rev)
	}
}

// errUnknownMethod is JSON-RPC's Method not found for a method the request's
// revision does not have.
func errUnknownMethod(method, revision string) error {
	if revision == "" {
		revision = "unknown"
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
		Message: fmt.Sprintf("Method not found: %s is not a method of protocol revision %s", method, revision)}
}

// slot carries, from a tool handler back to the middleware, the
// submission of the call: the operation it created or found, or a lost
// insert's key (tools.Submission.MayExist).
type slot struct{ sub *tools.Submission }

type slotKey struct{}

// Defer offers sub, the submission of this tools/call, to the middleware,
// which answers with a task where the request asked for one: a 2026-07-28
// request that opted in gets one if its operation is not final; a
// task-augmented 2025-11-25 call always does, also when the insert's
// answer was lost (sub.MayExist, no operation). It does nothing otherwise
// (only then is there a slot in ctx), so a request that asked for no task
// is answered exactly as without this package.
func Defer(ctx context.Context, sub tools.Submission) {
	if sl, ok := ctx.Value(slotKey{}).(*slot); ok {
		sl.sub = &sub
	}
}

// middleware gives a tools/call that asked for a task a slot and answers
// with the task the handler deferred to; for 2025-11-25 clients it also
// announces the capability in initialize and each write tool's support in
// tools/list. If a task cannot be rendered, the tool's own result (with
// its handle) is returned instead: it is true, and losing an answer is
// worse than a plain one.
func (s *Service) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			return initializeV1(res)
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil || !isV1(ctx, req.GetSession()) {
				return res, err
			}
			return s.listToolsV1(res)
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		if isV1(ctx, req.GetSession()) {
			if tool, task, ok := taskRequested(ctx); ok {
				if err := checkTaskMetadata(task); err != nil {
					return nil, err
				}
				return s.callV1(ctx, next, method, req, tool)
			}
		}
		// The per-request opt-in is 2026-07-28's: at 2025-11-25 a task is
		// asked for by "task" (above), and "receivers that do not declare
		// the task capability ... MUST process requests of that type
		// normally", which is every earlier revision.
		if revision(ctx, req.GetSession()) < ProtocolExtension || req.GetParams() == nil || !optedIn(req.GetParams().GetMeta()) {
			return next(ctx, method, req)
		}
		sl := &slot{}
		res, err := next(context.WithValue(ctx, slotKey{}, sl), method, req)
		// A lost insert's answer is not a task here: 2026-07-28 returns one
		// only once tasks/get would resolve it; the tool's own answer says
		// the outcome is unknown and to call again with the same key.
		if err != nil || sl.sub == nil || sl.sub.Operation.Handle == "" || Final(sl.sub.Operation) {
			return res, err
		}
		created, cerr := s.Created(ctx, *sl.sub)
		if cerr != nil {
			return res, err
		}
		return created, nil
	}
}

// optedIn reports whether the request's own _meta declares the extension
// among its client capabilities (a per-request opt-in, never remembered).
func optedIn(meta map[string]any) bool {
	raw, ok := meta[metaClientCapabilities]
	if !ok {
		return false
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return false
	}
	// By exact member names, as the SDK reads params: "Extensions" is not
	// "extensions".
	extensions, ok := mcpserver.ParamsMember(data, "extensions")
	if !ok {
		return false
	}
	_, ok = mcpserver.ParamsMember(extensions, Extension)
	return ok
}
