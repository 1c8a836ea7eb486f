// Package mcpserver is the MCP protocol boundary: it turns HTTP requests into
// validated tool calls and tool outcomes into MCP results. It knows nothing
// about operations, stores or providers (of this module it imports only
// requestid): tools, and the business codes their error results carry
// (Config.ErrorCodes), are registered by the caller.
//
// # What the go-sdk (v1.8.0) does
//
// New builds one mcp.Server and serves it with mcp.NewStreamableHTTPHandler
// in stateless, JSON-response mode. The SDK then:
//
//   - serves protocol 2026-07-28 without initialize or Mcp-Session-Id: the
//     version, client info and capabilities ride in each request's _meta,
//     the MCP-Protocol-Version header must equal _meta's version, and
//     Mcp-Method (plus Mcp-Name for tools/call) must repeat the body;
//   - answers server/discover (2026-07-28 only) with the supported versions,
//     capabilities and instructions;
//   - serves older clients (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)
//     that initialize first: each later POST gets a throwaway session whose
//     protocol version comes from the MCP-Protocol-Version header (absent
//     means 2025-03-26); GET and DELETE are 405;
//   - checks Mcp-Param-* headers against arguments whose schema property
//     carries "x-mcp-header" (2026-07-28 only; a missing or different header
//     is a -32020 JSON-RPC error, HTTP 400);
//   - answers unknown methods and unknown tools with JSON-RPC errors
//     (2026-07-28: HTTP 404 / 400; older: unknown tool is -32602 in a 200);
//   - runs every entry of a JSON-RPC batch (an array body), concurrently,
//     at 2025-03-26 and 2024-11-05, of any length; refuses batches from
//     2025-06-18 on;
//   - passes the HTTP headers and bearer TokenInfo to handlers in
//     CallToolRequest.Extra, and keeps the HTTP request's context values.
//
// # What this package adds
//
//   - Argument validation we own: tools are registered with the low-level
//     Server.AddTool, each tool's schemas are resolved once with
//     jsonschema-go, on its first call (New checks only their shape, so a
//     cold start answering tools/list resolves nothing; ResolveSchemas
//     lets a test find an unresolvable schema ahead of time), and bad
//     arguments (schema violations, duplicate keys, non-object arguments,
//     more than one Idempotency-Key header) become an isError result with
//     code INVALID_ARGUMENT and a short message naming the field, never a
//     JSON-RPC error and never a handler call.
//   - Registration rules: every input schema is an object schema with
//     "additionalProperties": false, every tool has an object outputSchema.
//   - A Call for the handler: raw validated arguments, Idempotency-Key,
//     a server-minted request id, the JSON-RPC id, the protocol version.
//   - The request deadline: the SDK detaches handler contexts from the HTTP
//     request, deadline included; a receiving middleware (the innermost,
//     so inside any extension's) gives every method handler the deadline
//     back (not the cancellation: a caller hanging up ends its wait, not an
//     operation in flight).
//   - Panic recovery: the SDK has none, so a panicking handler would end the
//     process. A panic or a nil result becomes OPERATION_UNKNOWN (retryable
//     with the same key), because the handler may already have had an effect.
//   - Origin validation (RefuseCrossOrigin, also put before authentication
//     by internal/app): a request a browser sent from another origin is
//     HTTP 403 with a JSON-RPC error without id, as every Streamable HTTP
//     revision requires; the SDK checks only a loopback listener's Host.
//   - Protocol faults as JSON-RPC errors: an unparsable body is -32700, a
//     body that is not JSON-RPC is -32600, an oversized body -32600 with
//     HTTP 413, and the SDK's plain-text 4xx answers to POSTs (e.g. an
//     unknown method under older protocol versions) are rewritten as
//     JSON-RPC errors with the same status and the request's id.
//   - JSON-RPC batches bounded: accepted only at 2025-03-26 (the one
//     revision that has them; no MCP-Protocol-Version header means it),
//     with at most 8 entries (API Gateway throttles HTTP requests, not the
//     calls inside them), each passing the checks a single message gets; a
//     batch failing any of these is refused whole, HTTP 400, before any of
//     it runs. Each accepted entry is a call of its own (argument checks,
//     the handler, and the caller's admission gate), but shares the HTTP
//     request's headers and has no JSONRPCID or RequestParams.
//   - Capabilities fixed to {"tools":{}}: no listChanged and no logging, so
//     subscriptions/listen acknowledges an empty subscription and completes
//     at once (as a short SSE body) instead of holding the response open
//     behind API Gateway.
//   - Extensions (Config.Extensions) plugged in through the SDK's extension
//     points only (receiving middleware, custom methods), each advertised
//     in capabilities.extensions; MCP Tasks (internal/tasks) is one.
//   - Result helpers (Success, BusinessError, Result) that put the same JSON
//     in structuredContent and in a text block for clients that ignore
//     structuredContent, and a check that logs successes not matching the
//     tool's outputSchema (the result is still returned).
package mcpserver
