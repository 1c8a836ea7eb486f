// README walkthrough: MCP Tasks with the official Tasks client
// (@modelcontextprotocol/ext-tasks) against `make run`.
//
//   source .devstack/env
//   test/clients/node_modules/.bin/node test/clients/tasks-walkthrough.mjs [ORDER_ID]
//
// The Risk API commits the review but drops its response; the write is
// answered with a task, and the client polls it (any instance answers)
// until it is completed with the verified result. One review per order:
// to run it again, pass another of Alice's orders (O20260728001-050).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';
import { httpDispatch } from './tasks-dispatch.mjs';

const { MCP_URL, TOKEN_ALICE, RISK_API_URL } = process.env;
const order = process.argv[2] ?? 'O20260728013';
if (!MCP_URL || !TOKEN_ALICE || !RISK_API_URL) {
  console.error('source .devstack/env first (make run writes it)');
  process.exit(2);
}
const protocolVersion = '2026-07-28';
const clientInfo = { name: 'tasks-walkthrough', version: '1.0.0' };

const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: protocolVersion } } });
await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${TOKEN_ALICE}` } },
}));
// At 2026-07-28 the Tasks client sends tools/call and tasks/* itself, over
// the raw JSON-RPC path its host gives it.
const session = createTaskSessionFromClient(client, {
  endpointId: MCP_URL,
  rawDispatch: httpDispatch(MCP_URL, TOKEN_ALICE),
  v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities: {} },
});

await fetch(`${RISK_API_URL}/_sim/faults`, {
  method: 'POST', body: JSON.stringify({ create: [{ mode: 'drop_response_after_commit', times: 1 }] }),
});
console.log(`tools/call request_risk_review ${order} (the Risk API will drop its response)`);
const execution = await session.callTool('request_risk_review',
  { order_id: order, reason: 'velocity', operation_id: `walkthrough-${order}` });
console.log(`-> ${execution.kind}${execution.handle ? ` ${execution.handle.taskId}` : ''}`);
const { outcome } = await execution.settle({
  onEvent: (e) => {
    if (e.type === 'task') {
      const poll = e.task.suggestedPollIntervalMs === undefined ? '' : ` (poll again in ${e.task.suggestedPollIntervalMs} ms)`;
      console.log(`   ${e.task.status}: ${e.task.statusMessage}${poll}`);
    }
  },
});
console.log(`outcome: ${outcome.status}`);
if (outcome.status === 'completed') console.log(JSON.stringify(outcome.result.structuredContent, null, 2));
await session.close();
await client.close();
