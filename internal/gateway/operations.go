package gateway

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// operationTool serves a tool about one existing operation (a family's
// companion or a shared operator tool): find the operation the caller
// names, if the caller may see it, and let the tool answer.
func (g *Gateway) operationTool(t tools.OperationTool) mcpserver.Tool {
	return mcpserver.Tool{
		Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: json.RawMessage(t.InputSchema), OutputSchema: json.RawMessage(t.OutputSchema),
		Annotations: annotations(t),
		Handler: g.serve(func(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
			op, err := g.lookup(ctx, c, call.Arguments, t.HandleArg, t.Of)
			if err != nil {
				return g.failure(ctx, rec, err)
			}
			rec.withOperation(op)
			r, err := t.Serve(ctx, c, op, call.Arguments)
			if err != nil {
				if t.Kind == tools.Decides {
					rec.PolicyDecision = obs.PolicyDeny
				}
				return g.failure(ctx, rec, err)
			}
			if t.Kind != tools.Reads {
				rec.PolicyDecision = obs.PolicyAllow
			}
			if r.Operation.Handle != "" {
				rec.withOperation(r.Operation)
			}
			if t.Kind == tools.Settles && len(r.Operation.Journal) > 0 {
				// What was decided and why, in the audit trail itself: the
				// item's journal expires with it.
				settled := r.Operation.Journal[len(r.Operation.Journal)-1]
				rec.Event, rec.ResourceID, rec.Detail = string(settled.Type), settled.ResourceID, settled.Detail
			}
			if r.Code != "" {
				rec.Code = string(r.Code) // the operation's, for audit
			}
			return mcpserver.Result(r.Body, r.IsError)
		}),
	}
}

// annotations are an operation tool's MCP hints: none reaches a system
// outside this server on the caller's behalf.
func annotations(t tools.OperationTool) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{Title: t.Title, OpenWorldHint: ptr(false)}
	switch t.Kind {
	case tools.Reads:
		a.ReadOnlyHint = true
	case tools.Decides:
		a.DestructiveHint, a.IdempotentHint = ptr(false), true
	case tools.Settles:
		a.DestructiveHint = ptr(true)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// lookup finds the operation named by operation_id (the caller's own key)
// or by handle, if the caller may see it (tools.Visibility); tool, when
// set, is the only write tool whose operations count.
func (g *Gateway) lookup(ctx context.Context, c tools.Caller, raw json.RawMessage, handleField, tool string) (operation.Operation, error) {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return operation.Operation{}, tools.Fail(tools.CodeInvalidArgument, false, nil, "arguments: %v", err)
	}
	ref := tools.Ref{Tool: tool}
	if id, ok := args["operation_id"].(string); ok {
		ref.OperationID = id
	} else {
		ref.Handle, _ = args[handleField].(string)
	}
	return g.cfg.Executor.Find(ctx, g.visibility, c, ref)
}
