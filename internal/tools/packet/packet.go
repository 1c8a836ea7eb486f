// Package packet builds the operation review packet (external_write_review
// plus its timeline, docs/design.md, Review packet): what get_operation
// returns for any write tool's operation. It reads an operation; it never changes one.
package packet

import (
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// Names of the tools that act on any family's operation. They live here so
// packet and the families agree on them without importing each other.
const (
	ToolGetOperation     = "get_operation"
	ToolResolveOperation = "resolve_operation"
)

// Packet is the review packet. Field names are the review packet's
// published vocabulary (docs/design.md, Review packet).
type Packet struct {
	// OperationID is the viewer's own key for the operation; null when the
	// operation's key belongs to another client or another tenant (a
	// tenant-mate's on another client, a granted team's on the same one
	// or, for an operator, anyone's): a key is never revealed outside the
	// key space (client, tenant and user) it was chosen in.
	OperationID *string `json:"operation_id"`
	// Handle is the opaque public handle (ticket_handle, review_id); it is
	// what an operator uses, since operation_ids are scoped per client.
	Handle string `json:"handle"`
	Tool   string `json:"tool"`
	State  string `json:"state"`
	// Outcome is the operation's outcome vocabulary (committed_and_verified,
	// dispatch_acknowledged_response_missing, ...).
	Outcome        string `json:"outcome"`
	Attempts       int    `json:"attempts"`
	ClientTimeouts int    `json:"client_timeouts"`
	// ResourceID and EffectReceipt are null until there is evidence.
	ResourceID         *string `json:"resource_id"`
	DuplicateResources int     `json:"duplicate_resources"`
	EffectReceipt      *string `json:"effect_receipt"`
	// DependentActionsBlockedWhileUnknown attests that dependent actions
	// (approve_rollout, reporting done) could not run while the outcome was
	// unproven. It holds by construction: every
	// dependent action refuses an operation that is not SUCCEEDED
	// (operation.Blocked), so it is always true; a packet for a settled
	// operation still says so.
	DependentActionsBlockedWhileUnknown bool `json:"dependent_actions_blocked_while_unknown"`
	// DependentActionsBlocked is the present tense: true while the
	// operation is not SUCCEEDED (operation.Blocked).
	DependentActionsBlocked bool `json:"dependent_actions_blocked"`
	// ApprovalMayHaveBeenGiven flags an incident (or an escalated duplicate
	// audit) on an operation that was SUCCEEDED and approvable before: a
	// dependent action such as approve_rollout may already have been
	// approved and must be reviewed with the incident.
	ApprovalMayHaveBeenGiven bool `json:"approval_may_have_been_given"`
	// RequestDigest is shown to the key's own viewer only, as OperationID
	// is: it hashes the end user with the arguments, and with the target
	// in view anyone else could test guessed users against it.
	RequestDigest *string           `json:"request_digest"`
	Target        map[string]string `json:"target"`
	// RetryAllowed is always false: a caller never re-sends a write whose
	// operation exists. Only the reconciler retries, after proof of absence
	// and with the same request key.
	RetryAllowed bool             `json:"retry_allowed"`
	NextAction   tools.NextAction `json:"next_action"`
	// Escalation is why an operator is needed; null otherwise.
	Escalation *string         `json:"escalation"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	Timeline   []TimelineEntry `json:"timeline"`
}

// Build makes the review packet of op as viewer may see it: the
// operation_id only when it is viewer's own key (OwnOperationID).
func Build(op operation.Operation, viewer tools.Caller) Packet {
	own := OwnOperationID(op, viewer)
	var ownDigest *string
	if own != nil {
		ownDigest = optional(op.RequestDigest)
	}
	p := Packet{
		OperationID:                         own,
		Handle:                              op.Handle,
		Tool:                                op.Key.Tool,
		State:                               string(op.State),
		Outcome:                             string(op.Outcome),
		Attempts:                            op.Attempts(),
		ClientTimeouts:                      op.ClientTimeouts,
		ResourceID:                          optional(op.ResourceID),
		DuplicateResources:                  op.DuplicateResources,
		EffectReceipt:                       optional(op.Receipt),
		DependentActionsBlockedWhileUnknown: true,
		DependentActionsBlocked:             op.Blocked(),
		ApprovalMayHaveBeenGiven:            op.State == operation.StateEscalated && op.ApprovableBefore(),
		RequestDigest:                       ownDigest,
		Target:                              map[string]string{},
		RetryAllowed:                        false,
		NextAction:                          NextAction(op),
		Escalation:                          optional(op.Escalation),
		CreatedAt:                           op.CreatedAt,
		UpdatedAt:                           op.UpdatedAt,
		Timeline:                            Timeline(op.Journal),
	}
	for k, v := range op.Target {
		p.Target[k] = v
	}
	return p
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// OwnOperationID is op's operation_id if it is viewer's own key: the
// viewer's client, tenant and subject scope it exactly as op's (the same
// tool's key in the viewer's scope is op's key), else nil. The same client
// of another tenant, or another user of the same tenant, is another key
// space: there the id would name another operation or none, and it is not
// theirs to know.
func OwnOperationID(op operation.Operation, viewer tools.Caller) *string {
	mine := operation.RequestKey{ClientID: viewer.ClientID, TenantID: viewer.TenantID, Subject: viewer.UserID, Tool: op.Key.Tool}
	if op.Key.ClientID == "" || mine.Scope() != op.Key.Scope() {
		return nil
	}
	return optional(op.Key.OperationID)
}

// ReadArgs are the get_operation arguments that name op: its handle, for
// every viewer. An operation_id names one operation per write tool it was
// used with (get_operation refuses it when it names several), and another
// client's or tenant's operation_id is never shown; the handle names one
// operation and reveals neither.
func ReadArgs(op operation.Operation) map[string]string {
	return map[string]string{"handle": op.Handle}
}

// NextAction is what a caller holding op should do next. It never tells a
// caller to send the write again: a new intent needs a new operation_id,
// and only the reconciler re-sends an existing one. Its arguments name op
// by ReadArgs.
func NextAction(op operation.Operation) tools.NextAction {
	readArgs := ReadArgs(op)
	switch op.State {
	case operation.StatePending:
		return tools.NextAction{Tool: ToolGetOperation, Arguments: readArgs,
			Hint: "the write is in flight; read the operation again shortly; do not send it again and do not start dependent actions"}
	case operation.StateUnknown:
		return tools.NextAction{Tool: ToolGetOperation, Arguments: readArgs,
			Hint: "the outcome is unknown; the reconciler is looking for the effect; do not send the write again, do not start dependent actions, do not report it done"}
	case operation.StateRetryable:
		// "Proven absent" only where it is (what tasks/get says too): an
		// absence the provider may still overtake, or a reported effect,
		// is not proof.
		hint := "the effect was proven absent; the reconciler will re-send it with the same request key; do not send it yourself"
		if ids := op.EffectEvidence(); len(ids) > 0 {
			hint = "the provider reported an effect of this operation (" + strings.Join(ids, ", ") +
				"); the reconciler reconciles it and never sends it twice; do not send it yourself and do not start dependent actions"
		} else if !op.EffectRuledOut() {
			hint = "not found at the provider, but an earlier request may still commit there; the reconciler will re-send it " +
				"with the same request key, which cannot make a second effect; do not send it yourself"
		}
		return tools.NextAction{Tool: ToolGetOperation, Arguments: readArgs, Hint: hint}
	case operation.StateEscalated:
		return tools.NextAction{Tool: ToolResolveOperation, Arguments: map[string]string{"handle": op.Handle},
			Hint: "an operator must resolve this operation with evidence; stop: do not retry, do not start dependent actions"}
	case operation.StateFailed:
		if ids := op.EffectsReportedAfterFailure(); len(ids) > 0 {
			return tools.NextAction{Tool: ToolResolveOperation, Arguments: map[string]string{"handle": op.Handle},
				Hint: "recorded failed without effect, but the provider later reported an effect (" + strings.Join(ids, ", ") +
					"); an operator must deal with it at the provider and close it with resolve_operation; " +
					"do not ask for this again, not even with a new operation_id"}
		}
		if op.WithdrawalAuditEscalated() {
			return tools.NextAction{Tool: ToolResolveOperation, Arguments: map[string]string{"handle": op.Handle},
				Hint: "withdrawn after its request was proven absent, but the audit that checks the provider kept its promise could not finish; " +
					"an operator must search the provider for the fact and close it with resolve_operation"}
		}
		return tools.NextAction{
			Hint: "the write failed without effect; if the action is still wanted it is a new intent: call the tool again with a NEW operation_id"}
	case operation.StateSucceeded:
		if op.AuditPending() {
			// dependent_actions_blocked and approve_rollout say wait: so
			// does the hint.
			return tools.NextAction{Tool: ToolGetOperation, Arguments: readArgs,
				Hint: "the effect is verified and has a receipt; a duplicate audit is still to show it is the only one " +
					"(the provider keeps no request identity); read the operation again after " + op.DueAt.UTC().Format(time.RFC3339) +
					"; do not send the write again and do not start dependent actions until then"}
		}
		return tools.NextAction{Hint: "the effect is verified and has a receipt; dependent actions may proceed"}
	}
	return tools.NextAction{Tool: ToolGetOperation, Arguments: readArgs, Hint: "read the operation again"}
}
