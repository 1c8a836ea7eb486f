// Package tasks serves the MCP Tasks extension (io.modelcontextprotocol/tasks)
// from the operation table: a task is an operation seen through the
// extension's vocabulary, so any instance answers tasks/get for any task and
// no task state lives in memory.
//
// It plugs into go-sdk v1.8 through its extension points only: a receiving
// middleware that turns an opted-in tools/call whose outcome is not final into
// a CreateTaskResult, and custom methods for tasks/get, tasks/cancel and
// tasks/update. The experimental Tasks of protocol 2025-11-25 (v1.go) are
// the same operations in that revision's shapes, plus tasks/result.
// docs/design.md ("MCP Tasks") says how to drop it once the SDK ships Tasks.
package tasks
