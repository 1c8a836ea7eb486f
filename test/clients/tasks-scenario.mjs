// The MCP Tasks client test with the official Tasks client
// (@modelcontextprotocol/ext-tasks) over the TypeScript SDK client, at
// 2026-07-28 (the extension) or 2025-11-25 (its experimental Tasks):
//
//   drop:   the Risk API drops the response of a committed create; the write
//           is answered with a task, which the client's own polling
//           (execution.settle) follows until it is completed.
//   cancel: every create fails before commit, so the operation is proven
//           unsent (RETRYABLE) between the reconciler's attempts; the client
//           cancels it with its own cancel API.
//
// Prints one JSON object with what the client saw; tasks_test.go judges it.
//
//   node tasks-scenario.mjs URL PROTOCOL RISK_API_URL ORDER_DROP ORDER_CANCEL
//   (token in TOKEN_ALICE)
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, toolDeclarationFromMcpTool } from '@modelcontextprotocol/ext-tasks/client';
import { httpDispatch } from './tasks-dispatch.mjs';

const [url, protocol, riskURL, orderDrop, orderCancel] = process.argv.slice(2);
if (!url || !protocol || !riskURL || !orderDrop || !orderCancel) {
  console.error('usage: node tasks-scenario.mjs URL PROTOCOL RISK_API_URL ORDER_DROP ORDER_CANCEL');
  process.exit(2);
}
const token = process.env.TOKEN_ALICE;
const clientInfo = { name: 'intentgate-tasks-client-test', version: '1.0.0' };
const modern = protocol !== '2025-11-25';

const client = new Client(clientInfo, { versionNegotiation: modern ? { mode: { pin: protocol } } : { mode: 'legacy' } });
await client.connect(new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
}));
const tools = (await client.listTools()).tools;
const declarations = new Map(tools.map((t) => [t.name, toolDeclarationFromMcpTool(t)]));
const session = createTaskSessionFromClient(client, {
  endpointId: `intentgate-client-test-${protocol}`,
  tools: { currentTool: (name) => declarations.get(name) },
  // The SDK Client cannot carry 2026-07-28 task traffic itself; the
  // package asks the host for a raw JSON-RPC path and the request framing.
  ...(modern ? {
    rawDispatch: httpDispatch(url, token),
    v2RequestFraming: { protocolVersion: protocol, clientInfo, clientCapabilities: {} },
  } : {}),
});

async function faults(body) {
  const res = await fetch(`${riskURL}/_sim/faults`, { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`POST /_sim/faults: ${res.status}`);
}
async function stats() {
  return (await fetch(`${riskURL}/_sim/stats`)).json();
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// snapshot reads a task once, again after an error that says to retry (the
// store budget on a loaded machine). Bounded by count.
async function snapshot(taskId) {
  for (let i = 0; ; i++) {
    try {
      return await session.task(taskId).snapshot();
    } catch (err) {
      if (i >= 10 || !/retry/.test(err.message)) throw err;
      await sleep(500);
    }
  }
}
// settle follows a task with the client's own polling (execution.settle).
// A poll the server answered with an error that says to retry (the store
// budget on a loaded machine) ends that settlement as failed; the client
// then follows the task again with its controller (task(id).result()), as
// the error asks. Bounded by count.
async function settle(execution, seen) {
  const settled = await execution.settle({ onEvent: (e) => { if (e.type === 'task') seen.push(e.task.status); } });
  let { outcome } = settled;
  for (let i = 0; i < 10 && execution.kind === 'task' && outcome.status === 'failed' && /retry/.test(outcome.error?.message ?? ''); i++) {
    out.retriedAfter = [...(out.retriedAfter ?? []), outcome.error.message];
    await sleep(500);
    try {
      outcome = await session.task(execution.handle.taskId).result();
      if (outcome.task) seen.push(outcome.task.status);
    } catch (err) {
      if (!/retry/.test(err.message)) throw err;
    }
  }
  return outcome;
}
const write = (order, reason, opID) => session.callTool('request_risk_review',
  { order_id: order, reason, operation_id: opID }, { task: { preference: 'prefer' } });
function taskSeen(v) {
  return v && { status: v.status, statusMessage: v.statusMessage ?? null, pollMs: v.suggestedPollIntervalMs ?? null, retentionMs: v.retentionMs };
}

const out = { protocol, capabilities: session.capabilities };
out.declaredTaskSupport = declarations.get('request_risk_review')?.taskSupport ?? null;

// drop: answered with a task, polled with the client's own polling.
await faults({ create: [{ mode: 'drop_response_after_commit', times: 1 }] });
const dropped = await write(orderDrop, 'tasks client test (dropped response)', `tasks-${protocol}-${orderDrop}`);
out.drop = { kind: dropped.kind, taskId: dropped.handle?.taskId ?? null, seen: [] };
if (dropped.kind === 'task') out.drop.first = taskSeen(await snapshot(dropped.handle.taskId));
const dropOutcome = await settle(dropped, out.drop.seen);
out.drop.outcome = dropOutcome.status;
if (dropOutcome.error) out.drop.error = String(dropOutcome.error.message);
out.drop.final = dropped.kind === 'task' ? taskSeen(await snapshot(dropped.handle.taskId)) : null;
const result = dropOutcome.result;
out.drop.result = result && { isError: result.isError === true, structuredContent: result.structuredContent ?? null };

// cancel: withdrawn while proven unsent. A reconciler claim may win the
// race for one RETRYABLE version (the cancel is then refused, saying so);
// the next RETRYABLE version is tried again. Bounded by count.
await faults({ create: [{ mode: 'error_500_before_commit', times: 1000 }] });
const unsent = await write(orderCancel, 'tasks client test (cancelled while unsent)', `tasks-${protocol}-${orderCancel}`);
out.cancel = { kind: unsent.kind, refusals: [] };
if (unsent.kind === 'task') {
  for (let i = 0; i < 400 && out.cancel.acknowledged !== true; i++) {
    const snap = await snapshot(unsent.handle.taskId);
    if (snap.status !== 'working') break;
    if (!(snap.statusMessage ?? '').startsWith('RETRYABLE')) {
      await sleep(100);
      continue;
    }
    try {
      await session.cancelTask(unsent.handle.taskId);
      out.cancel.acknowledged = true;
    } catch (err) {
      out.cancel.refusals.push({ code: err.code ?? null, message: err.message });
    }
  }
  out.cancel.createsAtCancel = (await stats()).create_calls;
  const cancelled = await settle(unsent, []);
  out.cancel.outcome = cancelled.status;
  if (cancelled.error) out.cancel.error = String(cancelled.error.message);
  out.cancel.final = taskSeen(await snapshot(unsent.handle.taskId));
  // Cancelling a cancelled task: acknowledged again at 2026-07-28, refused
  // as terminal at 2025-11-25.
  try {
    await session.cancelTask(unsent.handle.taskId);
    out.cancel.again = 'acknowledged';
  } catch (err) {
    out.cancel.again = err.message;
  }
}
await faults({});
out.cancel.createsAtEnd = (await stats()).create_calls;
out.cancel.committedForOrder = (await stats()).reviews_by_order?.[orderCancel] ?? 0;

console.log(JSON.stringify(out));
await session.close();
await client.close();
