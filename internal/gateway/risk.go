package gateway

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

// riskStatusTool is get_risk_review_status: the review's status by handle.
func (g *Gateway) riskStatusTool() mcpserver.Tool {
	return mcpserver.Tool{
		Name:         riskreview.ToolStatus,
		Title:        "Risk review status",
		Description:  "The current status of a risk review, by the review_id request_risk_review returned.",
		InputSchema:  json.RawMessage(riskreview.StatusInputSchema),
		OutputSchema: json.RawMessage(riskreview.OutputSchema),
		Annotations:  &mcp.ToolAnnotations{Title: "Risk review status", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		Handler:      g.serve(g.riskReviewStatus),
	}
}

func ptr[T any](v T) *T { return &v }

func (g *Gateway) riskReviewStatus(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
	op, _, err := g.lookup(ctx, c, call.Arguments, "review_id", riskreview.ToolRequest)
	if err != nil {
		return g.failure(ctx, rec, err)
	}
	rec.withOperation(op)
	r := g.cfg.Risk.Render(c, tools.Submission{Operation: op})
	if r.IsError {
		rec.Code = string(r.Code) // the operation's, for audit
	}
	// The query itself succeeded; the status says the rest.
	return mcpserver.Result(r.Body, false)
}
