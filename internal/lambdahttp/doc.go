// Package lambdahttp adapts API Gateway HTTP API events (payload format 2.0)
// to a standard http.Handler and back, and lets the same binary serve plain
// HTTP when it is not running under Lambda.
//
// It is hand-written rather than taken from awslabs' httpadapter because that
// adapter splits header values on commas. Payload 2.0 already joins repeated
// headers with commas, and MCP's Mcp-Param-* headers mirror tool arguments
// that may themselves contain commas, so a split would hand the server a
// truncated first value and hide a header/body mismatch. Here every header
// value reaches the handler verbatim, as one value.
package lambdahttp
