// The MCP Tasks client test with the official Tasks client
// (@modelcontextprotocol/ext-tasks) over the TypeScript SDK client, at
// 2026-07-28 (the extension) or 2025-11-25 (its experimental Tasks):
//
//   drop:   the Risk API drops the response of a committed create; the write
//           is answered with a task, which the client's own polling
//           (execution.settle) follows until it is completed.
//   cancel: every deployment-ticket create fails before commit; once the
//           Release API's search covers the commit horizon it promises, the
//           operation can have no effect (RETRYABLE, absence final) between
//           the reconciler's attempts; the deployer cancels it with the
//           client's own cancel API. (A Risk API absence is not final: that
//           provider promises no commit deadline, so it is never withdrawn.)
//
// Prints one JSON object with what the client saw; tasks_test.go judges it.
//
//   node tasks-scenario.mjs URL PROTOCOL RISK_API_URL RELEASE_API_URL ORDER_DROP COMMIT_CANCEL
//   (tokens in TOKEN_ALICE and TOKEN_DEPLOYER)
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, toolDeclarationFromMcpTool } from '@modelcontextprotocol/ext-tasks/client';
import { httpDispatch } from './tasks-dispatch.mjs';

const [url, protocol, riskURL, releaseURL, orderDrop, commitCancel] = process.argv.slice(2);
if (!url || !protocol || !riskURL || !releaseURL || !orderDrop || !commitCancel) {
  console.error('usage: node tasks-scenario.mjs URL PROTOCOL RISK_API_URL RELEASE_API_URL ORDER_DROP COMMIT_CANCEL');
  process.exit(2);
}
const clientInfo = { name: 'intentgate-tasks-client-test', version: '1.0.0' };
const modern = protocol !== '2025-11-25';

// open connects one end user's client and its Tasks session.
async function open(token) {
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
  return { client, session, declarations };
}
const alice = await open(process.env.TOKEN_ALICE);
const deployer = await open(process.env.TOKEN_DEPLOYER);
const { session, declarations } = alice;

async function faults(body, sim = riskURL) {
  const res = await fetch(`${sim}/_sim/faults`, { method: 'POST', body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`POST ${sim}/_sim/faults: ${res.status}`);
}
async function stats(sim = riskURL) {
  return (await fetch(`${sim}/_sim/stats`)).json();
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// snapshot reads a task once, again after an error that says to retry (the
// store budget on a loaded machine). Bounded by count.
async function snapshot(taskId, from = session) {
  for (let i = 0; ; i++) {
    try {
      return await from.task(taskId).snapshot();
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
async function settle(execution, seen, from = session) {
  const settled = await execution.settle({ onEvent: (e) => { if (e.type === 'task') seen.push(e.task.status); } });
  let { outcome } = settled;
  for (let i = 0; i < 10 && execution.kind === 'task' && outcome.status === 'failed' && /retry/.test(outcome.error?.message ?? ''); i++) {
    out.retriedAfter = [...(out.retriedAfter ?? []), outcome.error.message];
    await sleep(500);
    try {
      outcome = await from.task(execution.handle.taskId).result();
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

// cancel: withdrawn once the operation can have no effect. A reconciler
// claim may win the race for one RETRYABLE version: at 2025-11-25 the
// cancel is then refused, saying so; at 2026-07-28 it is acknowledged
// (cancellation is cooperative) and withdraws nothing, which tasks/get
// shows. The next RETRYABLE version is tried again, by the task's
// controller (task(id).cancel(), one tasks/cancel each): an execution
// treats its first acknowledgement as its local cancellation and does not
// send another. The Release API's commit horizon (lease, clock skew
// bound, settle window) passes before each, so this is bounded by time.
const target = `payments-api/${commitCancel}/production-eu`;
await faults({ create: [{ mode: 'error_500_before_commit', times: 1000 }] }, releaseURL);
const unsent = await deployer.session.callTool('create_deployment_ticket',
  { service: 'payments-api', commit: commitCancel, environment: 'production-eu', operation_id: `tasks-${protocol}-${commitCancel}` },
  { task: { preference: 'prefer' } });
out.cancel = { kind: unsent.kind, refusals: [], acknowledgedNotWithdrawn: 0 };
if (unsent.kind === 'task') {
  const until = Date.now() + 150_000;
  while (Date.now() < until && out.cancel.acknowledged !== true) {
    const snap = await snapshot(unsent.handle.taskId, deployer.session);
    if (snap.status !== 'working') break;
    if (!(snap.statusMessage ?? '').startsWith('RETRYABLE')) {
      await sleep(200);
      continue;
    }
    try {
      await deployer.session.task(unsent.handle.taskId).cancel();
    } catch (err) {
      out.cancel.refusals.push({ code: err.code ?? null, message: err.message });
      continue;
    }
    if ((await snapshot(unsent.handle.taskId, deployer.session)).status === 'cancelled') {
      out.cancel.acknowledged = true;
    } else {
      out.cancel.acknowledgedNotWithdrawn++;
    }
  }
  out.cancel.createsAtCancel = (await stats(releaseURL)).create_calls;
  const cancelled = await settle(unsent, [], deployer.session);
  out.cancel.outcome = cancelled.status;
  if (cancelled.error) out.cancel.error = String(cancelled.error.message);
  out.cancel.final = taskSeen(await snapshot(unsent.handle.taskId, deployer.session));
  // Cancelling a cancelled task: acknowledged again at 2026-07-28, refused
  // as terminal at 2025-11-25.
  try {
    await deployer.session.cancelTask(unsent.handle.taskId);
    out.cancel.again = 'acknowledged';
  } catch (err) {
    out.cancel.again = err.message;
  }
}
await faults({}, releaseURL);
out.cancel.createsAtEnd = (await stats(releaseURL)).create_calls;
out.cancel.committedForTarget = (await stats(releaseURL)).tickets_by_target?.[target] ?? 0;

console.log(JSON.stringify(out));
for (const end of [alice, deployer]) {
  await end.session.close();
  await end.client.close();
}
