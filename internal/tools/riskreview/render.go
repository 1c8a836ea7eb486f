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
		InputSchema: InputSchema(), OutputSchema: OutputSchema(), OpenWorld: true,
	}
}

// Result is the structuredContent of request_risk_review and
// get_risk_review_status (OutputSchema).
type Result struct {
	ReviewID string `json:"review_id"`
	// OperationID is shown only in the key space (client, tenant and user)
	// that chose it.
	OperationID  string            `json:"operation_id,omitempty"`
	Status       string            `json:"status"`
	Outcome      string            `json:"outcome"`
	Deduplicated bool              `json:"deduplicated"`
	RetryAllowed bool              `json:"retry_allowed"`
	Message      string            `json:"message"`
	NextAction   *tools.NextAction `json:"next_action,omitempty"`
	// DownstreamReviewID and EffectReceipt are set once there is evidence.
	DownstreamReviewID string `json:"downstream_review_id,omitempty"`
	EffectReceipt      string `json:"effect_receipt,omitempty"`
	// Code accompanies a result whose operation did not (yet) succeed.
	Code tools.Code `json:"code,omitempty"`
}

// Render is the result of request_risk_review and get_risk_review_status:
// the review handle, status and outcome, with the code, message and next
// action of the state. Another client's or tenant's operation_id is
// never shown.
func (f *Family) Render(caller tools.Caller, sub tools.Submission) tools.Rendered {
	op := sub.Operation
	v := tools.ViewOf(op, ToolStatus, "review_id")
	body := Result{
		ReviewID: op.Handle, Status: string(op.State), Outcome: string(op.Outcome),
		Deduplicated: sub.Deduplicated, RetryAllowed: v.RetryAllowed, Message: v.Message,
		NextAction: v.Next, DownstreamReviewID: op.ResourceID, EffectReceipt: op.Receipt, Code: v.Code,
	}
	if sub.Deduplicated || sub.OperationID == "" {
		// Another operation (or a status query): its key only if it is ours.
		if id := packet.OwnOperationID(op, caller); id != nil {
			body.OperationID = *id
		}
	} else {
		body.OperationID = sub.OperationID
	}
	if sub.Deduplicated {
		body.Message = "an active review for this order already exists; this is it (nothing new was sent): " + v.Message
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
		InputSchema:  StatusInputSchema(),
		OutputSchema: OutputSchema(),
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
