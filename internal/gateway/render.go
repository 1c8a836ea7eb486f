package gateway

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
)

// stateView is what a caller is told about an operation's state: whether
// the call counts as an error, the code, whether a new request may be sent,
// and what to do next.
type stateView struct {
	isError      bool
	code         tools.Code
	message      string
	retryAllowed bool
	next         *tools.NextAction
}

// viewOf maps an operation to its caller-facing view. UNKNOWN is never
// reported as done and never invites a retry: the next action is always a
// status query with the handle.
func viewOf(op operation.Operation, statusTool, handleArg string) stateView {
	query := &tools.NextAction{Tool: statusTool, Arguments: map[string]string{handleArg: op.Handle}}
	switch op.State {
	case operation.StateSucceeded:
		return stateView{message: "committed and verified", next: &tools.NextAction{Hint: "done; do not call again for this intent"}}
	case operation.StateFailed:
		query.Hint = "proven no effect; a new attempt needs a new operation_id"
		return stateView{isError: true, code: tools.CodeOperationFailed, message: "failed without effect", retryAllowed: true, next: query}
	case operation.StateEscalated:
		query.Hint = "an operator must resolve this; do not retry"
		return stateView{isError: true, code: tools.CodeOperationEscalated, message: "escalated: " + op.Escalation, next: query}
	default:
		query.Hint = "outcome not yet known; query status, do not resend"
		return stateView{isError: true, code: tools.CodeOperationUnknown,
			message: "accepted; outcome not yet known (" + string(op.Outcome) + "); the server reconciles it", next: query}
	}
}

// operationResult renders structured content with the state view's fields.
func operationResult(body map[string]any, v stateView) *mcp.CallToolResult {
	body["retry_allowed"] = v.retryAllowed
	if v.next != nil {
		body["next_action"] = v.next
	}
	if v.code != "" {
		body["code"] = v.code
	}
	body["message"] = v.message
	return mcpserver.Result(body, v.isError)
}
