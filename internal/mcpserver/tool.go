package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"

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
	// TakesIdempotencyKey: the handler takes the Idempotency-Key header as
	// the call's key when its arguments name none. A header names one call,
	// so a JSON-RPC batch under one may hold at most one call of such a
	// tool (checkBatch).
	TakesIdempotencyKey bool
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

// maxToolNameLength and validToolName are the tool name syntax the
// 2025-11-25 spec recommends: 1-128 of A-Z a-z 0-9 _ . - (checked by hand:
// a regular expression compiled at package init costs every cold start).
const maxToolNameLength = 128

func validToolName(name string) bool {
	if name == "" || len(name) > maxToolNameLength {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// registeredTool is a Tool as the server holds it. Its schemas' shape is
// checked at registration; resolving them for validation waits for the
// tool's first call (schemas), because resolving every tool's schemas was
// most of a cold start's CPU and a cold start's first request is usually a
// tools/list or an unauthenticated probe, which need only the JSON.
type registeredTool struct {
	tool Tool
	// advertisedOutput is the outputSchema clients are shown: the tool's
	// own joined with the error envelope.
	advertisedOutput json.RawMessage
	schemas          func() (toolSchemas, error)
	logger           *slog.Logger
}

// toolSchemas are a tool's schemas resolved for validation.
type toolSchemas struct {
	input  *compiledSchema // with the refusal wording (problems)
	output *compiledSchema // the advertised output schema
}

func registerTool(t Tool, envelope json.RawMessage, logger *slog.Logger) (*registeredTool, error) {
	if !validToolName(t.Name) {
		return nil, fmt.Errorf("tool name %q: must be 1-%d characters of A-Z a-z 0-9 _ . -", t.Name, maxToolNameLength)
	}
	if t.Handler == nil {
		return nil, fmt.Errorf("tool %q: nil handler", t.Name)
	}
	if err := checkClosedObjectRoot(t.InputSchema); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	advertised, err := advertisedOutputSchema(t.OutputSchema, envelope)
	if err != nil {
		return nil, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
	}
	return &registeredTool{
		tool: t, advertisedOutput: advertised, logger: logger.With("tool", t.Name),
		schemas: sync.OnceValues(func() (toolSchemas, error) { return compileToolSchemas(t.InputSchema, advertised) }),
	}, nil
}

// compileToolSchemas resolves a tool's input schema and its advertised
// output schema, which nests the tool's own.
func compileToolSchemas(inputSchema, advertisedOutput json.RawMessage) (toolSchemas, error) {
	input, err := compileObjectSchema(inputSchema, true)
	if err != nil {
		return toolSchemas{}, fmt.Errorf("input schema: %w", err)
	}
	input.problems = newProblemNode(input.schema)
	output, err := compileObjectSchema(advertisedOutput, false)
	if err != nil {
		return toolSchemas{}, fmt.Errorf("output schema: %w", err)
	}
	return toolSchemas{input: input, output: output}, nil
}

// ResolveSchemas resolves every tool's schemas as its first call would, and
// returns the first failure. New checks only their shape, so a schema that
// cannot be resolved (say, a "$ref" to a document it cannot load) would
// otherwise surface only when the tool is first called: a test of a tool
// set calls this.
func ResolveSchemas(tools ...Tool) error {
	envelope, err := errorEnvelopeSchema(errorCodes(nil))
	if err != nil {
		return fmt.Errorf("mcpserver: %w", err)
	}
	for _, t := range tools {
		rt, err := registerTool(t, envelope, slog.New(slog.DiscardHandler))
		if err != nil {
			return fmt.Errorf("mcpserver: %w", err)
		}
		if _, err := rt.schemas(); err != nil {
			return fmt.Errorf("mcpserver: tool %q: %w", t.Name, err)
		}
	}
	return nil
}

func (rt *registeredTool) mcpTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         rt.tool.Name,
		Title:        rt.tool.Title,
		Description:  rt.tool.Description,
		InputSchema:  rt.tool.InputSchema,
		OutputSchema: rt.advertisedOutput,
		Annotations:  rt.tool.Annotations,
		Meta:         rt.tool.Meta,
	}
}

// handle is the SDK-level handler: it validates, builds the Call and runs
// the tool's handler. Its one JSON-RPC error is a tool whose schemas do not
// resolve: a defect of the server, refused before anything runs.
func (rt *registeredTool) handle(ctx context.Context, req *mcp.CallToolRequest) (result *mcp.CallToolResult, _ error) {
	schemas, err := rt.schemas()
	if err != nil {
		rt.logger.ErrorContext(ctx, "tool schemas do not resolve; the call was refused", "error", err)
		return nil, fmt.Errorf("tool %q cannot be called: its %w", rt.tool.Name, err)
	}
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
	args, problem := checkArguments(schemas.input, raw)
	if problem != "" {
		return rt.invalidArgument(problem), nil
	}
	call.Arguments = args

	result = rt.tool.Handler(ctx, call)
	if result == nil {
		rt.logger.ErrorContext(ctx, "tool handler returned no result", "request_id", call.RequestID)
		return rt.outcomeUnknown(), nil
	}
	rt.checkOutput(ctx, schemas.output, call, result)
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
func (rt *registeredTool) checkOutput(ctx context.Context, output *compiledSchema, call Call, result *mcp.CallToolResult) {
	data, err := structuredJSON(result.StructuredContent)
	if err == nil {
		_, err = output.validateJSON(data)
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
