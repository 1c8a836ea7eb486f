// Package tools is the one way to add a write tool. A tool family (risk
// reviews, deployment tickets, ...) implements WriteTool: how to validate
// and key its arguments, who may act on the object, how to send the create
// and how to find its effect again. The Executor runs the path every write
// shares, in the order the seed demands — domain validation, authorization,
// dual keys, durable intent, dispatch, classification, verification — and
// the reconciler reuses the same Dispatch and Probe for recovery.
package tools
