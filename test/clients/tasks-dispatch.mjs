// The raw JSON-RPC path @modelcontextprotocol/ext-tasks asks its host for
// at 2026-07-28 (`rawDispatch`): the SDK Client's own codecs reject the
// extension's wire shapes (a tools/call answered with resultType "task",
// tasks/get). One stateless POST per request, with the headers 2026-07-28
// requires (MCP-Protocol-Version from the request's _meta, Mcp-Method,
// Mcp-Name) and the bearer token.
const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';
const NAME_SOURCE = { 'tools/call': 'name', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' };

let nextID = 1;

export function httpDispatch(url, token) {
  return async (request, options = {}) => {
    const message = { jsonrpc: '2.0', id: nextID++, ...request };
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
      'mcp-method': message.method,
      // Lower-cased, so the Mcp-Name the client passes for a task (as
      // "Mcp-Name") and ours below are one header: fetch would join two
      // differently cased keys into "id, id", which the server refuses
      // (-32020: it does not match params.taskId).
      ...Object.fromEntries(Object.entries(options.context?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
    };
    const version = message.params?._meta?.[PROTOCOL_VERSION_META];
    if (typeof version === 'string') headers['mcp-protocol-version'] = version;
    const nameField = NAME_SOURCE[message.method];
    if (nameField && typeof message.params?.[nameField] === 'string') headers['mcp-name'] = message.params[nameField];
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(message), signal: options.signal });
    const text = await res.text();
    const body = res.headers.get('content-type')?.startsWith('text/event-stream') ? lastEvent(text) : text;
    let reply;
    try {
      reply = JSON.parse(body);
    } catch {
      throw new Error(`${message.method}: HTTP ${res.status} without a JSON-RPC reply: ${text.slice(0, 200)}`);
    }
    if (reply.error) return { kind: 'error', error: reply.error };
    return { kind: 'result', result: reply.result };
  };
}

// lastEvent is the data of the last server-sent event (the response).
function lastEvent(text) {
  const events = text.split(/\r?\n\r?\n/).map((ev) => ev.split(/\r?\n/)
    .filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n')).filter((d) => d !== '');
  return events.at(-1) ?? '';
}
