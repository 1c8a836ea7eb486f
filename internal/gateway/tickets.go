package gateway

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/release"
)

// ticketTools are the action that depends on a deployment ticket (approve
// a rollout); the ticket write itself is a published family.
func (g *Gateway) ticketTools() []mcpserver.Tool {
	return []mcpserver.Tool{{
		Name:        release.ToolApprove,
		Title:       "Approve a rollout",
		Description: "Approve the rollout for a deployment ticket. Refused unless the ticket's creation is committed_and_verified.",
		InputSchema: json.RawMessage(release.ApproveInputSchema), OutputSchema: json.RawMessage(release.ApproveOutputSchema),
		Annotations: &mcp.ToolAnnotations{Title: "Approve a rollout", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
		Handler:     g.serve(g.approveRollout),
	}}
}

// operationTools read and settle operations of every family.
func (g *Gateway) operationTools() []mcpserver.Tool {
	return []mcpserver.Tool{{
		Name:        packet.ToolGetOperation,
		Title:       "Operation review packet",
		Description: "The journal of a write operation: intended effect, state, outcome, attempts, timeouts, reconciliation evidence and receipt.",
		InputSchema: json.RawMessage(release.GetOperationInputSchema), OutputSchema: json.RawMessage(packet.OutputSchema),
		Annotations: &mcp.ToolAnnotations{Title: "Operation review packet", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		Handler:     g.serve(g.getOperation),
	}, {
		Name:        packet.ToolResolveOperation,
		Title:       "Resolve an escalated operation",
		Description: "Operators only: settle an ESCALATED operation to SUCCEEDED or FAILED with evidence.",
		InputSchema: json.RawMessage(release.ResolveInputSchema), OutputSchema: json.RawMessage(release.ResolveOutputSchema),
		Annotations: &mcp.ToolAnnotations{Title: "Resolve an escalated operation", DestructiveHint: ptr(true), IdempotentHint: false, OpenWorldHint: ptr(false)},
		Handler:     g.serve(g.resolveOperation),
	}}
}

// lookup finds the operation named by operation_id (the caller's own key)
// or by handle, if the caller may see it (tools.Visibility); tool, when
// set, is the only write tool whose operations count.
func (g *Gateway) lookup(ctx context.Context, c tools.Caller, raw json.RawMessage, handleField, tool string) (operation.Operation, map[string]any, error) {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return operation.Operation{}, nil, tools.Fail(tools.CodeInvalidArgument, false, nil, "arguments: %v", err)
	}
	ref := tools.Ref{Tool: tool}
	if id, ok := args["operation_id"].(string); ok {
		ref.OperationID = id
	} else {
		ref.Handle, _ = args[handleField].(string)
	}
	op, err := g.cfg.Executor.Find(ctx, g.visibility, c, ref)
	return op, args, err
}

func (g *Gateway) getOperation(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
	op, _, err := g.lookup(ctx, c, call.Arguments, "handle", "")
	if err != nil {
		return g.failure(ctx, rec, err)
	}
	rec.withOperation(op)
	return mcpserver.Success(packet.Build(op, c))
}

func (g *Gateway) approveRollout(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
	op, _, err := g.lookup(ctx, c, call.Arguments, "ticket_handle", release.ToolCreate)
	if err != nil {
		return g.failure(ctx, rec, err)
	}
	rec.withOperation(op)
	approval, err := g.cfg.Release.Approve(c, op)
	if err != nil {
		rec.PolicyDecision = obs.PolicyDeny
		return g.failure(ctx, rec, err)
	}
	rec.PolicyDecision = obs.PolicyAllow
	return mcpserver.Success(approval)
}

// family is the write tool family named tool, or nil when this server does
// not serve it.
func (g *Gateway) family(tool string) tools.WriteTool {
	for _, w := range g.cfg.Writes {
		if w.Name() == tool {
			return w
		}
	}
	return nil
}

func (g *Gateway) resolveOperation(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
	op, args, err := g.lookup(ctx, c, call.Arguments, "handle", "")
	if err != nil {
		return g.failure(ctx, rec, err)
	}
	rec.withOperation(op)
	resolution, _ := args["resolution"].(string)
	evidence, _ := args["evidence"].(string)
	resourceID, _ := args["resource_id"].(string)
	effectsRemoved, _ := args["effects_removed"].(bool)
	settled, err := release.Resolve(ctx, g.cfg.Executor, g.family(op.Key.Tool), c, op, resolution, evidence, resourceID, effectsRemoved)
	if err != nil {
		return g.failure(ctx, rec, err)
	}
	rec.PolicyDecision = obs.PolicyAllow
	rec.withOperation(settled)
	return mcpserver.Success(packet.Build(settled, c))
}
