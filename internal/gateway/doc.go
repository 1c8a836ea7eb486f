// Package gateway is the business safety boundary as MCP tools: it turns a
// validated tools/call into an Executor call for the trusted caller, bounds
// write tools with the admission gate, renders operations as the tools'
// structured results, and writes one audit record per call. The protocol
// mechanics live in mcpserver; the rules of a write live in tools and
// operation.
package gateway
