package tools

import "github.com/intentgate/intentgate/internal/operation"

// Published is a write tool that also describes its MCP surface, so the
// gateway serves it with no code of its own: a new write tool is one
// package implementing this, registered in internal/app.
type Published interface {
	WriteTool
	Spec() ToolSpec
	// Render is the structured result a caller gets for a submission.
	Render(caller Caller, sub Submission) Rendered
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
		return StateView{Message: "committed and verified", Next: &NextAction{Hint: "done; do not call again for this intent"}}
	case operation.StateFailed:
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
