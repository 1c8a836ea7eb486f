package riskreview

import (
	"context"
	"encoding/json"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// Spec describes request_risk_review to MCP clients.
func (f *Family) Spec() tools.ToolSpec {
	return tools.ToolSpec{
		Title: "Request a risk review",
		Description: "Request a risk review for an order your merchant owns. Exactly once per order: " +
			"reuse operation_id on every retry. If the status is UNKNOWN, do not call again: " +
			"call " + ToolStatus + " with the review_id.",
		InputSchema: InputSchema, OutputSchema: OutputSchema, OpenWorld: true,
	}
}

// Render is the result of request_risk_review and get_risk_review_status:
// the review handle, status and outcome, with the code, message and next
// action of the state. Another client's operation_id is never shown.
func (f *Family) Render(caller tools.Caller, sub tools.Submission) tools.Rendered {
	op := sub.Operation
	v := tools.ViewOf(op, ToolStatus, "review_id")
	body := map[string]any{
		"review_id": op.Handle, "status": string(op.State), "outcome": string(op.Outcome),
		"deduplicated": sub.Deduplicated, "retry_allowed": v.RetryAllowed, "message": v.Message,
	}
	if sub.Deduplicated || sub.OperationID == "" {
		// Another operation (or a status query): its key only if it is ours.
		if id := packet.OwnOperationID(op, caller); id != nil {
			body["operation_id"] = *id
		}
	} else {
		body["operation_id"] = sub.OperationID
	}
	if sub.Deduplicated {
		body["message"] = "an active review for this order already exists; this is it (nothing new was sent): " + v.Message
	}
	if op.ResourceID != "" {
		body["downstream_review_id"] = op.ResourceID
	}
	if op.Receipt != "" {
		body["effect_receipt"] = op.Receipt
	}
	if v.Next != nil {
		body["next_action"] = v.Next
	}
	if v.Code != "" {
		body["code"] = v.Code
	}
	return tools.Rendered{Body: body, IsError: v.IsError, Code: v.Code}
}

// Companions publishes get_risk_review_status: a review's status by the
// review_id request_risk_review returned.
func (f *Family) Companions() []tools.OperationTool {
	return []tools.OperationTool{{
		Name:         ToolStatus,
		Title:        "Risk review status",
		Description:  "The current status of a risk review, by the review_id request_risk_review returned.",
		InputSchema:  StatusInputSchema,
		OutputSchema: OutputSchema,
		Kind:         tools.Reads,
		HandleArg:    "review_id",
		Of:           ToolRequest,
		Serve:        f.status,
	}}
}

// status answers get_risk_review_status. The query itself succeeded, so it
// is never an error result; the status says the rest, and its code is
// kept for audit.
func (f *Family) status(_ context.Context, caller tools.Caller, op operation.Operation, _ json.RawMessage) (tools.Rendered, error) {
	r := f.Render(caller, tools.Submission{Operation: op})
	r.IsError = false
	return r, nil
}
