package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/requestid"
)

// Tool is one MCP tool: its contract (schemas, annotations) and its handler.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is a JSON Schema 2020-12 object schema whose root says
	// "additionalProperties": false. Arguments are validated against it
	// before Handler runs.
	InputSchema json.RawMessage
	// OutputSchema is a JSON Schema 2020-12 object schema for the
	// structuredContent of the tool's own results. Clients are shown it
	// joined with the error envelope (advertisedOutputSchema), so every
	// result conforms, BusinessError ones included.
	OutputSchema json.RawMessage
	Annotations  *mcp.ToolAnnotations
	// Meta is the tool's _meta (e.g. an extension's per-tool declaration).
	Meta map[string]any
	// Handler runs only for arguments that satisfy InputSchema. It must
	// return a non-nil result; build it with Success, BusinessError or Result.
	Handler func(ctx context.Context, call Call) *mcp.CallToolResult
}

// Call is what a tool handler gets for one tools/call.
type Call struct {
	// Tool is the name of the tool being called.
	Tool string
	// Arguments are the caller's arguments exactly as sent, already valid
	// against the tool's InputSchema ("{}" when none were sent).
	Arguments json.RawMessage
	// IdempotencyKey is the Idempotency-Key HTTP header, trimmed, or "".
	IdempotencyKey string
	// RequestID identifies the HTTP request for logs and audit: the id the
	// front set (internal/requestid), else one the boundary minted.
	// Never taken from the caller. Also returned as the X-Request-Id header.
	RequestID string
	// JSONRPCID is the JSON-RPC id of the tools/call, as text. Chosen by the
	// client and only unique within its own session, so not a log key.
	JSONRPCID string
	// ProtocolVersion is the MCP protocol version of this request: from
	// _meta (2026-07-28) or the MCP-Protocol-Version header (older; absent
	// means 2025-03-26).
	ProtocolVersion string
}

// toolNamePattern is the tool name syntax recommended by the 2025-11-25 spec.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// registeredTool is a Tool with its schemas resolved.
type registeredTool struct {
	tool   Tool
	input  *compiledSchema
	output *compiledSchema
	logger *slog.Logger
}

func compileTool(t Tool, envelope json.RawMessage, logger *slog.Logger) (*registeredTool, error) {
	if !toolNamePattern.MatchString(t.Name) {
		return nil, fmt.Errorf("tool name %q: must match %s", t.Name, toolNamePattern)
	}
	if t.Handler == nil {
		return nil, fmt.Errorf("tool %q: nil handler", t.Name)
	}
	input, err := compileObjectSchema(t.InputSchema, true)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	input.problems = newProblemNode(input.schema)
	if _, err := compileObjectSchema(t.OutputSchema, false); err != nil {
		return nil, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
	}
	advertised, err := advertisedOutputSchema(t.OutputSchema, envelope)
	if err != nil {
		return nil, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
	}
	output, err := compileObjectSchema(advertised, false)
	if err != nil {
		return nil, fmt.Errorf("tool %q: advertised output schema: %w", t.Name, err)
	}
	return &registeredTool{tool: t, input: input, output: output, logger: logger.With("tool", t.Name)}, nil
}

func (rt *registeredTool) mcpTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         rt.tool.Name,
		Title:        rt.tool.Title,
		Description:  rt.tool.Description,
		InputSchema:  rt.input.raw,
		OutputSchema: rt.output.raw,
		Annotations:  rt.tool.Annotations,
		Meta:         rt.tool.Meta,
	}
}

// handle is the SDK-level handler: it validates, builds the Call, runs the
// tool's handler, and never returns a JSON-RPC error.
func (rt *registeredTool) handle(ctx context.Context, req *mcp.CallToolRequest) (result *mcp.CallToolResult, _ error) {
	info := requestInfoFrom(ctx)
	call := Call{
		Tool:            rt.tool.Name,
		RequestID:       requestid.From(ctx).Request,
		ProtocolVersion: req.ProtocolVersion(),
	}
	// The SDK does not recover panics in handlers; one would end the process
	// (every request in flight) instead of this call.
	defer func() {
		if p := recover(); p != nil {
			rt.logger.ErrorContext(ctx, "tool handler panicked",
				"request_id", call.RequestID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			result = rt.outcomeUnknown()
		}
	}()
	header := requestHeader(req, info)
	if info != nil {
		call.JSONRPCID = info.jsonrpcID
	}

	keys := header.Values(HeaderIdempotencyKey)
	if len(keys) > 1 {
		return rt.invalidArgument("more than one Idempotency-Key header"), nil
	}
	if len(keys) == 1 {
		call.IdempotencyKey = strings.TrimSpace(keys[0])
	}

	var raw json.RawMessage
	if req.Params != nil {
		raw = req.Params.Arguments
	}
	args, problem := checkArguments(rt.input, raw)
	if problem != "" {
		return rt.invalidArgument(problem), nil
	}
	call.Arguments = args

	result = rt.tool.Handler(ctx, call)
	if result == nil {
		rt.logger.ErrorContext(ctx, "tool handler returned no result", "request_id", call.RequestID)
		return rt.outcomeUnknown(), nil
	}
	rt.checkOutput(ctx, call, result)
	return result, nil
}

// requestHeader prefers the headers the SDK attaches to the request
// (RequestExtra.Header) and falls back to the ones the boundary recorded.
func requestHeader(req *mcp.CallToolRequest, info *requestInfo) http.Header {
	if req.Extra != nil && req.Extra.Header != nil {
		return req.Extra.Header
	}
	if info != nil && info.header != nil {
		return info.header
	}
	return http.Header{}
}

func (rt *registeredTool) invalidArgument(problem string) *mcp.CallToolResult {
	return BusinessError(CodeInvalidArgument, problem, false, &NextAction{
		Tool: rt.tool.Name,
		Hint: "nothing was executed; correct the arguments to match the tool's inputSchema and call again",
	})
}

// outcomeUnknown answers a handler that failed without a result. It may
// have caused an effect first, so the caller must not read this as failure.
func (rt *registeredTool) outcomeUnknown() *mcp.CallToolResult {
	return BusinessError(CodeOperationUnknown,
		"the server failed while handling this call; its outcome is unknown", true, &NextAction{
			Tool: rt.tool.Name,
			Hint: "do not assume failure: repeat the identical call with the same Idempotency-Key to learn the outcome; it will not be executed twice",
		})
}

// checkOutput logs a result, success or error, whose structuredContent
// violates the advertised outputSchema. The result is still returned: it
// may report an effect that already happened, and hiding it would invite a
// duplicate.
func (rt *registeredTool) checkOutput(ctx context.Context, call Call, result *mcp.CallToolResult) {
	data, err := structuredJSON(result.StructuredContent)
	if err == nil {
		_, err = rt.output.validateJSON(data)
	}
	if err != nil {
		rt.logger.ErrorContext(ctx, "tool result does not match its outputSchema",
			"request_id", call.RequestID, "is_error", result.IsError, "error", shortenLibraryError(err))
	}
}

func structuredJSON(structured any) ([]byte, error) {
	if structured == nil {
		return nil, fmt.Errorf("missing structuredContent")
	}
	if raw, ok := structured.(json.RawMessage); ok {
		return raw, nil
	}
	data, err := json.Marshal(structured)
	if err != nil {
		return nil, fmt.Errorf("encoding structuredContent: %w", err)
	}
	return data, nil
}
