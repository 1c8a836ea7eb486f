package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Codes this package itself answers with. Every other code is the
// caller's vocabulary, registered with Config.ErrorCodes.
const (
	// CodeInvalidArgument: the arguments do not satisfy the tool's
	// inputSchema; nothing was executed.
	CodeInvalidArgument = "INVALID_ARGUMENT"
	// CodeOperationUnknown: the handler failed without a result (a panic,
	// no result, an unencodable one); it may have had an effect.
	CodeOperationUnknown = "OPERATION_UNKNOWN"
)

// ErrorBody is the structuredContent of every error result built here.
// Its codes are the server's vocabulary (Config.ErrorCodes).
type ErrorBody struct {
	Code         string      `json:"code"`
	Message      string      `json:"message"`
	RetryAllowed bool        `json:"retry_allowed"`
	NextAction   *NextAction `json:"next_action,omitempty"`
}

// NextAction tells the caller what to do next: which tool, with which
// arguments.
type NextAction struct {
	Tool      string            `json:"tool,omitempty"`
	Arguments map[string]string `json:"arguments,omitempty"`
	Hint      string            `json:"hint"`
}

// BusinessError returns a tool result with isError true whose
// structuredContent is {code, message, retry_allowed, next_action}. It is a
// valid tool result, never a JSON-RPC error, so the model can read it and
// decide whether to fix its arguments, wait, or query status.
func BusinessError(code, message string, retryAllowed bool, next *NextAction) *mcp.CallToolResult {
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
			Code:         CodeOperationUnknown,
			Message:      fmt.Sprintf("the server could not encode the result (%v); the outcome of this call is unknown", err),
			RetryAllowed: true,
			NextAction:   &NextAction{Hint: "repeat the identical call with the same Idempotency-Key to learn the outcome; it will not be executed twice"},
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
