// The client-test scenario with the TypeScript SDK client
// (@modelcontextprotocol/client): list the tools, a successful write, a
// refused write, a status read. Prints one JSON object with what the client
// returned; clients_test.go judges it.
//
//   node scenario.mjs URL PROTOCOL ORDER_ID   (tokens in TOKEN_ALICE, TOKEN_BOB)
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, protocol, orderID] = process.argv.slice(2);
if (!url || !protocol || !orderID) {
  console.error('usage: node scenario.mjs URL PROTOCOL ORDER_ID');
  process.exit(2);
}

async function connect(token) {
  // 2026-07-28 is the modern era, pinned (no fallback); older protocols use
  // the initialize handshake, which offers the SDK's latest handshake version.
  const versionNegotiation = protocol === '2025-11-25' ? { mode: 'legacy' } : { mode: { pin: protocol } };
  const client = new Client({ name: 'intentgate-client-test-ts', version: '1.0.0' }, { versionNegotiation });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

function shown(res) {
  return { isError: res.isError === true, structuredContent: res.structuredContent ?? null };
}

const alice = await connect(process.env.TOKEN_ALICE);
const bob = await connect(process.env.TOKEN_BOB);
const out = { protocol: alice.getNegotiatedProtocolVersion?.() ?? alice.protocolVersion ?? null };
out.tools = (await alice.listTools()).tools.map((t) => t.name);
// callTool validates structuredContent against the tool's outputSchema.
// A refusal that allows a retry (TEMPORARY_UNAVAILABLE, OVERLOADED on a
// loaded machine) is retried as the result says: the same operation_id.
let write;
for (let i = 0; i < 10; i++) {
  write = await alice.callTool({
    name: 'request_risk_review',
    arguments: { order_id: orderID, reason: 'client test (TypeScript SDK)', operation_id: `ts-${protocol}-${orderID}` },
  });
  if (!(write.isError && write.structuredContent?.retry_allowed === true)) break;
  await new Promise((resolve) => setTimeout(resolve, 500));
}
out.write = shown(write);
await bob.listTools();
out.refused = shown(await bob.callTool({ name: 'request_risk_review', arguments: { order_id: orderID, reason: 'not my order' } }));
// The status read: as the result tells a client to, it queries until the
// review settles (a loaded machine may answer the write while PENDING), and
// again after a refusal that allows it.
for (let i = 0; i < 120; i++) {
  out.status = shown(await alice.callTool({ name: 'get_risk_review_status', arguments: { review_id: write.structuredContent?.review_id } }));
  const retry = out.status.isError && out.status.structuredContent?.retry_allowed === true;
  if (!retry && !['PENDING', 'UNKNOWN', 'RETRYABLE'].includes(out.status.structuredContent?.status)) break;
  await new Promise((resolve) => setTimeout(resolve, 500));
}
console.log(JSON.stringify(out));
await alice.close();
await bob.close();
