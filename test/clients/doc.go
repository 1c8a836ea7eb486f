// Package clients drives the devstack (`make run`'s whole system) with the
// MCP clients people use, each through the same scenario: list the tools,
// a successful write, a refused write shown with its code, a status read.
//
//   - the go-sdk client, at 2026-07-28 and 2025-11-25;
//   - the TypeScript SDK client (@modelcontextprotocol/client, scenario.mjs)
//     at both protocols;
//   - the Python SDK client (mcp, python/scenario.py) at both protocols;
//   - the MCP Inspector CLI (@modelcontextprotocol/inspector).
//
// The MCP Tasks client (@modelcontextprotocol/ext-tasks, tasks-scenario.mjs,
// TestTasksClient) has its own scenario: a dropped provider response
// answered with a task the client polls until it is completed, and a cancel
// of an operation proven unsent. tasks-walkthrough.mjs is the README's.
//
// The clients are pinned in package.json / package-lock.json (npm ci into
// this folder, with the Node 22 runtime the Inspector needs) and
// python/requirements.txt (pip into .venv-clients); `make client-deps`
// installs them and `make test` depends on it. A client that is not
// installed fails its test loudly: it is never skipped.
//
// Every structuredContent a client shows is also checked against the tool's
// advertised outputSchema with an independent validator.
package clients
