package tools

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/operation"
)

// Published is a write tool that also describes its MCP surface, so the
// gateway serves it with no code of its own: a new write tool is one
// package implementing this, registered in internal/app.
type Published interface {
	WriteTool
	Spec() ToolSpec
	// Render is the structured result a caller gets for a submission.
	Render(caller Caller, sub Submission) Rendered
	// Companions are the family's other tools, each about one operation
	// of this family (a status query, an action that depends on the
	// effect); nil when it has none.
	Companions() []OperationTool
}

// ToolSpec is the protocol-neutral description of a write tool.
type ToolSpec struct {
	Title       string
	Description string
	// InputSchema and OutputSchema are JSON Schema 2020-12 objects with
	// additionalProperties false. The output schema must admit the code
	// and message fields an unfinished operation's result carries.
	InputSchema  string
	OutputSchema string
	// OpenWorld: the tool reaches a system outside this server.
	OpenWorld bool
}

// Rendered is a result and whether the call counts as not (yet) succeeded.
type Rendered struct {
	Body    any
	IsError bool
	Code    Code // the code of an unfinished operation, for audit
	// Operation, when it has a handle, is the operation as the call left
	// it (a Settles tool's result), for audit.
	Operation operation.Operation
}

// StateView is what a caller is told about an operation's state: whether
// the call counts as an error, the code, whether a new intent may be sent,
// and what to do next.
type StateView struct {
	IsError      bool
	Code         Code
	Message      string
	RetryAllowed bool
	Next         *NextAction
}

// ViewOf maps an operation to its caller-facing view. UNKNOWN is never
// reported as done and never invites a retry: the next action is a status
// query (statusTool with the handle under handleArg).
func ViewOf(op operation.Operation, statusTool, handleArg string) StateView {
	query := &NextAction{Tool: statusTool, Arguments: map[string]string{handleArg: op.Handle}}
	switch op.State {
	case operation.StateSucceeded:
		if op.AuditPending() {
			// SUCCEEDED is final except for this audit: dependent actions
			// wait for it, as approve_rollout does.
			query.Hint = "read it again after " + op.DueAt.UTC().Format(time.RFC3339) +
				"; do not call again for this intent, and do not start dependent actions until the audit is clean"
			return StateView{Message: "committed and verified; a duplicate audit is still to show it is the only effect", Next: query}
		}
		return StateView{Message: "committed and verified", Next: &NextAction{Hint: "done; do not call again for this intent"}}
	case operation.StateFailed:
		if ids := op.EffectsReportedAfterFailure(); len(ids) > 0 {
			// The fact is free again, but an effect exists: a new attempt
			// would make a second one.
			query.Hint = "an operator must look at the reported effect; do not ask for this again, not even with a new operation_id"
			return StateView{IsError: true, Code: CodeOperationFailed, Next: query,
				Message: "recorded failed without effect, but the provider later reported an effect (" + strings.Join(ids, ", ") + ")"}
		}
		if op.WithdrawalAuditEscalated() {
			// Withdrawn on the provider's promise not to commit later, and
			// the audit that checks it could not finish: a late commit is
			// not ruled out, and a new request would then make a second.
			query.Hint = "an operator is checking the provider for a late effect; wait for the resolution before asking for this again"
			return StateView{IsError: true, Code: CodeOperationFailed, Next: query,
				Message: "withdrawn after its request was proven absent at the provider; whether the provider kept its promise not to commit it later could not be checked, and an operator is looking"}
		}
		query.Hint = "proven no effect; a new attempt needs a new operation_id"
		return StateView{IsError: true, Code: CodeOperationFailed, Message: "failed without effect", RetryAllowed: true, Next: query}
	case operation.StateEscalated:
		query.Hint = "an operator must resolve this; do not retry"
		return StateView{IsError: true, Code: CodeOperationEscalated, Message: "escalated: " + op.Escalation, Next: query}
	default:
		query.Hint = "outcome not yet known; query status, do not resend"
		return StateView{IsError: true, Code: CodeOperationUnknown,
			Message: "accepted; outcome not yet known (" + string(op.Outcome) + "); the server reconciles it", Next: query}
	}
}

// OperationTool is a tool that reads or acts on one existing operation,
// named by the caller's operation_id or by its public handle, and answered
// only if the caller may see it (Visibility). A family publishes its own
// (a status query, an action that depends on its effect) with
// Published.Companions; the operator tools every family shares are
// published the same way (internal/tools/operator). The gateway serves
// them all with one code path.
type OperationTool struct {
	Name        string
	Title       string
	Description string
	// InputSchema and OutputSchema are JSON Schema 2020-12 objects, the
	// input closed (additionalProperties false).
	InputSchema  string
	OutputSchema string
	Kind         OperationToolKind
	// HandleArg is the argument that carries the operation's handle when
	// the caller does not name it by operation_id (e.g. "review_id").
	HandleArg string
	// Of, when set, is the only write tool whose operations this tool
	// answers for; any other is NotVisible.
	Of string
	// Serve answers for op, which the caller may see. args are the call's
	// arguments, already valid against InputSchema. An error should be a
	// *Failure.
	Serve func(ctx context.Context, caller Caller, op operation.Operation, args json.RawMessage) (Rendered, error)
}

// OperationToolKind says what an operation tool does, for its MCP
// annotations and its audit record.
type OperationToolKind int

const (
	// Reads only: read-only; no policy decision is audited.
	Reads OperationToolKind = iota
	// Decides an action on the operation's effect (approve a rollout):
	// idempotent, not destructive; audited as allowed when it answers,
	// denied when it refuses.
	Decides
	// Settles the operation (an operator's resolution): destructive, not
	// idempotent; audited as allowed when it answers, with the operation
	// as it is afterwards.
	Settles
)
