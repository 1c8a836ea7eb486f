package tasks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/operation"
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

// Install plugs the extension into server through go-sdk's extension
// points: a receiving middleware for tools/call and three custom methods.
func (s *Service) Install(server *mcp.Server) error {
	server.AddReceivingMiddleware(s.middleware)
	if err := mcp.AddReceivingCustomMethod(server, MethodGet, func(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*GetTaskResult, error) {
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
	if err := mcp.AddReceivingCustomMethod(server, MethodCancel, func(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*AckResult, error) {
		if !optedIn(p.GetMeta()) {
			return nil, errMissingCap()
		}
		if err := s.Cancel(ctx, p.TaskID); err != nil {
			return nil, err
		}
		return &AckResult{ResultType: "complete"}, nil
	}); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodUpdate, func(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*AckResult, error) {
		if !optedIn(p.GetMeta()) {
			return nil, errMissingCap()
		}
		return nil, s.Update(ctx, p.TaskID)
	}); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	return nil
}

// slot carries, from a tool handler back to the middleware, the operation
// whose outcome was not final within the call.
type slot struct{ op *operation.Operation }

type slotKey struct{}

// Defer tells the middleware to answer this tools/call with a task for op
// instead of the tool's result. It does nothing unless the request opted
// in to the extension (only then is there a slot in ctx), so a request
// that did not opt in is answered exactly as without this package.
func Defer(ctx context.Context, op operation.Operation) {
	if sl, ok := ctx.Value(slotKey{}).(*slot); ok {
		sl.op = &op
	}
}

// middleware gives an opted-in tools/call a slot and, if the handler
// deferred, answers with the CreateTaskResult. If the task cannot be
// rendered, the tool's own result (with its handle) is returned instead:
// it is true, and losing an answer is worse than a plain one.
func (s *Service) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" || req.GetParams() == nil || !optedIn(req.GetParams().GetMeta()) {
			return next(ctx, method, req)
		}
		sl := &slot{}
		res, err := next(context.WithValue(ctx, slotKey{}, sl), method, req)
		if err != nil || sl.op == nil {
			return res, err
		}
		created, cerr := s.Created(ctx, *sl.op)
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
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	data, err := json.Marshal(raw)
	if err != nil || json.Unmarshal(data, &caps) != nil {
		return false
	}
	_, ok = caps.Extensions[Extension]
	return ok
}
