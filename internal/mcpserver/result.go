package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/tools"
)

// ErrorBody is the structuredContent of every error result built here.
// Codes and next actions are the business vocabulary of internal/tools.
type ErrorBody struct {
	Code         tools.Code        `json:"code"`
	Message      string            `json:"message"`
	RetryAllowed bool              `json:"retry_allowed"`
	NextAction   *tools.NextAction `json:"next_action,omitempty"`
	// Handle is the operation the refusal is about, when the caller may
	// see it (e.g. the ticket an approval was refused for).
	Handle string `json:"handle,omitempty"`
}

// BusinessError returns a tool result with isError true whose
// structuredContent is {code, message, retry_allowed, next_action}. It is a
// valid tool result, never a JSON-RPC error, so the model can read it and
// decide whether to fix its arguments, wait, or query status.
func BusinessError(code tools.Code, message string, retryAllowed bool, next *tools.NextAction) *mcp.CallToolResult {
	return Result(ErrorBody{Code: code, Message: message, RetryAllowed: retryAllowed, NextAction: next}, true)
}

// Success returns a tool result with isError false carrying structured as
// structuredContent. structured must satisfy the tool's outputSchema.
func Success(structured any) *mcp.CallToolResult {
	return Result(structured, false)
}

// Result returns a tool result carrying structured both as structuredContent
// and as a JSON text content block (for clients that ignore
// structuredContent). Both are the same bytes.
//
// If structured cannot be encoded (a programming error, e.g. a NaN float),
// the result is an OPERATION_UNKNOWN error: the handler may already have
// caused an effect, so the caller must not be told it failed.
func Result(structured any, isError bool) *mcp.CallToolResult {
	data, err := json.Marshal(structured)
	if err != nil {
		data = mustMarshal(ErrorBody{
			Code:         tools.CodeOperationUnknown,
			Message:      fmt.Sprintf("the server could not encode the result (%v); the outcome of this call is unknown", err),
			RetryAllowed: true,
			NextAction:   &tools.NextAction{Hint: "repeat the identical call with the same Idempotency-Key to learn the outcome; it will not be executed twice"},
		})
		isError = true
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(data)}},
		StructuredContent: json.RawMessage(data),
		IsError:           isError,
	}
}

// mustMarshal marshals values whose encoding cannot fail (plain strings,
// bools and maps of strings).
func mustMarshal(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: encoding %T: %v", v, err))
	}
	return data
}

// errorEnvelopeSchema describes ErrorBody. JSON Schema 2020-12. Every
// tool's advertised outputSchema admits it (see advertisedOutputSchema).
const errorEnvelopeSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "code": {"type": "string", "enum": ["UNAUTHENTICATED", "INVALID_ARGUMENT", "NOT_FOUND", "FORBIDDEN", "IDEMPOTENCY_CONFLICT", "TEMPORARY_UNAVAILABLE", "OVERLOADED", "PRECONDITION_FAILED", "OPERATION_UNKNOWN", "OPERATION_FAILED", "OPERATION_ESCALATED"]},
    "message": {"type": "string"},
    "retry_allowed": {"type": "boolean"},
    "next_action": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "tool": {"type": "string"},
        "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
        "hint": {"type": "string"}
      },
      "required": ["hint"]
    },
    "handle": {"type": "string", "pattern": "^op_[a-z2-7]{26}$"}
  },
  "required": ["code", "message", "retry_allowed"]
}`

// ErrorEnvelopeSchema returns the JSON Schema of the structuredContent of
// error results built by BusinessError. Every tool's advertised
// outputSchema is {"type":"object","anyOf":[<the tool's own>, this]}.
func ErrorEnvelopeSchema() json.RawMessage {
	return json.RawMessage(errorEnvelopeSchema)
}
