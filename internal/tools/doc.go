// Package tools is the one way to add a write tool. A tool family (risk
// reviews, deployment tickets, ...) implements WriteTool: how to validate
// and key its arguments, who may act on the object, how to send the create
// and how to find its effect again. The Executor runs the path every write
// shares, in this order (docs/design.md) — domain validation, authorization,
// dual keys, durable intent, dispatch, classification, verification — and
// the reconciler reuses the same Dispatch and Probe for recovery. Published
// adds the family's MCP surface: its write tool's schemas and result, and
// its companion tools (OperationTool), served by the gateway with no code of
// their own.
package tools
