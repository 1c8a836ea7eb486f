package release

import (
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// Approval is the answer of approve_rollout: the rollout may proceed for
// this verified ticket.
type Approval struct {
	TicketHandle  string `json:"ticket_handle"`
	OperationID   string `json:"operation_id"`
	TicketID      string `json:"ticket_id"`
	EffectReceipt string `json:"effect_receipt"`
	Decision      string `json:"decision"` // always "approved"; refusals are errors
}

// Approve is the dependent action of seed 001: approving a rollout is
// allowed only for a ticket whose creation is proven (SUCCEEDED,
// committed_and_verified, with a ticket id and an effect receipt). Anything
// else is PRECONDITION_FAILED with the reason and get_operation as the next
// action: an unknown creation must never be approved.
func Approve(op operation.Operation) (Approval, error) {
	if op.Key.Tool != ToolCreate {
		return Approval{}, refuse(op, "operation %s is not a deployment ticket (%s)", op.Handle, op.Key.Tool)
	}
	switch op.State {
	case operation.StateSucceeded:
		if op.Outcome != operation.OutcomeCommittedAndVerified || op.Receipt == "" || op.ResourceID == "" {
			return Approval{}, refuse(op, "ticket creation succeeded but is not verified with a ticket id and receipt; an operator must look")
		}
		return Approval{
			TicketHandle: op.Handle, OperationID: op.Key.OperationID, TicketID: op.ResourceID,
			EffectReceipt: op.Receipt, Decision: "approved",
		}, nil
	case operation.StatePending:
		return Approval{}, refuse(op, "ticket creation is still in flight; wait for its outcome")
	case operation.StateUnknown:
		return Approval{}, refuse(op, "ticket creation is unknown; reconciliation must prove it first")
	case operation.StateRetryable:
		return Approval{}, refuse(op, "no ticket exists yet: creation was proven absent and awaits the reconciler's retry")
	case operation.StateEscalated:
		if op.Outcome == operation.OutcomeIncidentMultipleEffects {
			return Approval{}, refuse(op, "multiple tickets exist: incident raised; operator must resolve")
		}
		return Approval{}, refuse(op, "ticket creation could not be proven; escalated to an operator, who must resolve it first")
	case operation.StateFailed:
		return Approval{}, refuse(op, "ticket creation failed without effect; there is no ticket to approve")
	}
	return Approval{}, refuse(op, "operation is in state %s; nothing can be approved", op.State)
}

func refuse(op operation.Operation, format string, args ...any) *tools.Failure {
	next := &tools.NextAction{
		Tool:      packet.ToolGetOperation,
		Arguments: map[string]string{"operation_id": op.Key.OperationID},
		Hint:      "read the operation's review packet; approve only once it is SUCCEEDED with a receipt",
	}
	return tools.Fail(tools.CodePreconditionFailed, false, next, format, args...)
}
