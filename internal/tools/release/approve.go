package release

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
)

// Approval is the answer of approve_rollout: the rollout may proceed for
// this verified ticket.
type Approval struct {
	TicketHandle string `json:"ticket_handle"`
	// OperationID is null when the ticket operation is another client's or
	// another tenant's (packet.OwnOperationID).
	OperationID   *string `json:"operation_id"`
	TicketID      string  `json:"ticket_id"`
	EffectReceipt string  `json:"effect_receipt"`
	Decision      string  `json:"decision"` // always "approved"; refusals are errors
}

// Approve is the action that depends on a deployment ticket: approving
// its rollout must wait until the ticket is known to exist. The caller must
// be allowed to approve rollouts of the ticket's service (policy.CanApproveRollout: a
// deployer of a team granted the service, or an operator): being able to
// see the ticket is not enough. Otherwise FORBIDDEN, before anything about
// the ticket's state is said. Then approval is allowed only for a ticket
// whose creation is proven (SUCCEEDED, committed_and_verified, with a
// ticket id and an effect receipt). Anything else is PRECONDITION_FAILED
// with the reason and get_operation as the next action: an unknown
// creation must never be approved.
func (f *Family) Approve(caller tools.Caller, op operation.Operation) (Approval, error) {
	if op.Key.Tool != ToolCreate {
		return Approval{}, refusal(caller, op, "operation %s is not a deployment ticket (%s)", op.Handle, op.Key.Tool)
	}
	if d := f.grants.CanApproveRollout(caller.Roles, caller.TenantID, op.Target["service"]); !d.Allow {
		return Approval{}, tools.Fail(tools.CodeForbidden, false, nil, "no permission to approve rollouts of this service (%s)", d.Reason)
	}
	if resolvedBy(op, caller) {
		return Approval{}, tools.Fail(tools.CodeForbidden, false, nil,
			"you resolved this operation; its rollout must be approved by another principal")
	}
	refuse := func(format string, args ...any) *tools.Failure { return refusal(caller, op, format, args...) }
	switch op.State {
	case operation.StateSucceeded:
		if op.AuditPending() {
			why := "ticket creation was re-sent"
			if op.Attempts() < 2 {
				// The Release API keeps no request identity: a ticket found
				// by search may be another request's while this one's own
				// create may still commit.
				why = "the ticket was found by a search, not named by the create's own answer"
			}
			return Approval{}, refuse("%s; the duplicate audit has not yet shown it is the only ticket; wait for it", why)
		}
		if op.Outcome != operation.OutcomeCommittedAndVerified || op.Receipt == "" || op.ResourceID == "" {
			return Approval{}, refuse("ticket creation succeeded but is not verified with a ticket id and receipt; an operator must look")
		}
		return Approval{
			TicketHandle: op.Handle, OperationID: packet.OwnOperationID(op, caller), TicketID: op.ResourceID,
			EffectReceipt: op.Receipt, Decision: "approved",
		}, nil
	case operation.StatePending:
		return Approval{}, refuse("ticket creation is still in flight; wait for its outcome")
	case operation.StateUnknown:
		return Approval{}, refuse("ticket creation is unknown; reconciliation must prove it first")
	case operation.StateRetryable:
		if ids := op.EffectEvidence(); len(ids) > 0 {
			return Approval{}, refuse("a ticket was reported (%s) although its absence was proven; reconciliation must settle it first", strings.Join(ids, ", "))
		}
		if !op.EffectRuledOut() {
			// As get_operation and tasks/get say it: an absence an earlier
			// request may still overtake is no proof.
			return Approval{}, refuse("no ticket was found, but an earlier request may still commit; the reconciler's retry settles it first")
		}
		return Approval{}, refuse("no ticket exists yet: creation was proven absent and awaits the reconciler's retry")
	case operation.StateEscalated:
		if op.Outcome == operation.OutcomeIncidentMultipleEffects {
			return Approval{}, refuse("multiple tickets exist: incident raised; operator must resolve")
		}
		return Approval{}, refuse("ticket creation could not be proven; escalated to an operator, who must resolve it first")
	case operation.StateFailed:
		if ids := op.EffectsReportedAfterFailure(); len(ids) > 0 {
			return Approval{}, refuse("ticket creation was recorded failed, but a ticket was reported afterwards (%s); an operator must look", strings.Join(ids, ", "))
		}
		return Approval{}, refuse("ticket creation failed without effect; there is no ticket to approve")
	}
	return Approval{}, refuse("operation is in state %s; nothing can be approved", op.State)
}

// resolvedBy: caller is the principal (end-user subject) who recorded an
// operator resolution of op. Four eyes: whoever settled what the effect is
// does not also approve acting on it. Compared by subject alone, so the
// same person under another tenant claim is still the resolver.
func resolvedBy(op operation.Operation, caller tools.Caller) bool {
	for _, ev := range op.Journal {
		if (ev.Type == operation.EventOperatorSucceeded || ev.Type == operation.EventOperatorFailed) &&
			ev.Actor != "" && ev.Actor == caller.UserID {
			return true
		}
	}
	return false
}

// refusal is PRECONDITION_FAILED with get_operation, naming op the way
// caller may (its own operation_id, else the handle).
func refusal(caller tools.Caller, op operation.Operation, format string, args ...any) *tools.Failure {
	next := &tools.NextAction{
		Tool:      packet.ToolGetOperation,
		Arguments: packet.ReadArgs(op),
		Hint:      "read the operation's review packet; approve only once it is SUCCEEDED with a receipt",
	}
	return tools.Fail(tools.CodePreconditionFailed, false, next, format, args...)
}

// Companions publishes approve_rollout, the action that depends on a
// deployment ticket.
func (f *Family) Companions() []tools.OperationTool {
	return []tools.OperationTool{{
		Name:         ToolApprove,
		Title:        "Approve a rollout",
		Description:  "Approve the rollout for a deployment ticket. Refused unless the ticket's creation is committed_and_verified.",
		InputSchema:  ApproveInputSchema(),
		OutputSchema: ApproveOutputSchema(),
		Kind:         tools.Decides,
		HandleArg:    "ticket_handle",
		Of:           ToolCreate,
		Serve: func(_ context.Context, caller tools.Caller, op operation.Operation, _ json.RawMessage) (tools.Rendered, error) {
			approval, err := f.Approve(caller, op)
			if err != nil {
				return tools.Rendered{}, err
			}
			return tools.Rendered{Body: approval}, nil
		},
	}}
}
