package release

import (
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// Result is create_deployment_ticket's structuredContent (OutputSchema).
type Result struct {
	TicketHandle string `json:"ticket_handle"`
	// OperationID is the key to read the operation with. Null when the
	// call was deduplicated onto another client's or tenant's operation:
	// that key is never revealed (use ticket_handle instead).
	OperationID   *string          `json:"operation_id"`
	Status        string           `json:"status"`
	Outcome       string           `json:"outcome"`
	ResourceID    *string          `json:"resource_id"`
	EffectReceipt *string          `json:"effect_receipt"`
	Deduplicated  bool             `json:"deduplicated"`
	RetryAllowed  bool             `json:"retry_allowed"`
	NextAction    tools.NextAction `json:"next_action"`
	// Code and Message accompany a result whose call did not (yet)
	// succeed (isError): the same vocabulary every tool uses.
	Code    tools.Code `json:"code,omitempty"`
	Message string     `json:"message,omitempty"`
}

// NewResult describes a submission to its caller. retry_allowed is always
// false: the operation exists, so the caller never sends it again (only the
// reconciler re-sends, after proving absence).
func NewResult(caller tools.Caller, sub tools.Submission) Result {
	op := sub.Operation
	r := Result{
		TicketHandle:  op.Handle,
		Status:        string(op.State),
		Outcome:       string(op.Outcome),
		ResourceID:    optional(op.ResourceID),
		EffectReceipt: optional(op.Receipt),
		Deduplicated:  sub.Deduplicated,
		// The operation is the caller's own unless deduplicated onto
		// another client's or tenant's; OwnOperationID decides either way,
		// so a foreign operation_id can never be shown.
		OperationID: packet.OwnOperationID(op, caller),
		NextAction:  packet.NextAction(op),
	}
	if sub.Deduplicated {
		r.NextAction = dedupNext(op, packet.ReadArgs(op))
	}
	return r
}

// dedupNext points at the operation holding the target, and says what its
// own next action says: a SUCCEEDED whose audit is due, or an incident,
// is not leave to go on.
func dedupNext(op operation.Operation, args map[string]string) tools.NextAction {
	if op.State == operation.StateFailed {
		// A key bound to a holder that has failed since: the holder's
		// failure released the target, and its own hint says what follows.
		return tools.NextAction{Tool: packet.ToolGetOperation, Arguments: args,
			Hint: "this operation_id was answered with the ticket operation that held this service, commit and environment, which has FAILED " +
				"since; nothing was sent by this call. That operation: " + packet.NextAction(op).Hint}
	}
	return tools.NextAction{Tool: packet.ToolGetOperation, Arguments: args,
		Hint: "a ticket operation for this service, commit and environment already exists (state " + string(op.State) +
			"); nothing was sent; do not create another ticket. That operation: " + packet.NextAction(op).Hint}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Spec describes create_deployment_ticket to MCP clients.
func (f *Family) Spec() tools.ToolSpec {
	return tools.ToolSpec{
		Title: "Create a deployment ticket",
		Description: "Create the deployment ticket for service+commit+environment, exactly once. Reuse operation_id on every retry; " +
			"never invent a new one for the same intent. UNKNOWN means: call get_operation, do not resend.",
		InputSchema: InputSchema(), OutputSchema: OutputSchema(), OpenWorld: true,
	}
}

// Render is create_deployment_ticket's result, with the code and message
// every tool gives an operation that has not (yet) succeeded.
func (f *Family) Render(caller tools.Caller, sub tools.Submission) tools.Rendered {
	res := NewResult(caller, sub)
	v := tools.ViewOf(sub.Operation, packet.ToolGetOperation, "operation_id")
	if v.IsError {
		res.Code, res.Message = v.Code, v.Message
	}
	return tools.Rendered{Body: res, IsError: v.IsError, Code: v.Code}
}
