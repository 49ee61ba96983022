// The page's MCP client: the official TypeScript SDK, bundled for the browser by `drive.mjs`.
// It exposes `window.scenario(config)`, which runs the steps against the nodes and returns what
// each step saw; `window.blocked(url)` tries one request from a page whose origin is not allowed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function bearer(token) {
  return { headers: { Authorization: `Bearer ${token}` } };
}

async function step(out, name, run) {
  try {
    out[name] = await run();
  } catch (err) {
    out[name] = { error: String(err?.message ?? err), code: err?.code };
  }
}

window.scenario = async ({ nodeA, nodeB, token, wideToken }) => {
  const out = {};
  const client = new Client({ name: 'browser-page', version: '0' });
  const transport = new StreamableHTTPClientTransport(new URL(nodeA), {
    requestInit: bearer(token),
  });
  await step(out, 'connect', async () => {
    await client.connect(transport);
    return { sessionId: transport.sessionId, protocolVersion: transport.protocolVersion };
  });
  await step(out, 'list', async () => (await client.listTools()).tools.map((t) => t.name).sort());
  await step(out, 'call', async () => {
    const r = await client.callTool({ name: 'echo', arguments: { text: 'from the page' } });
    return r.content[0].text;
  });
  await step(out, 'progress', async () => {
    const seen = [];
    const r = await client.callTool(
      { name: 'countdown', arguments: { n: 3, interval_ms: 50 } },
      undefined,
      { onprogress: (p) => seen.push(p.progress) },
    );
    return { text: r.content[0].text, progress: seen };
  });
  // The same session on the other node, by hand: the page reads the session id it was given.
  await step(out, 'otherNode', async () => {
    const res = await fetch(nodeB, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${token}`,
        'Mcp-Session-Id': transport.sessionId,
        'MCP-Protocol-Version': transport.protocolVersion,
      },
      body: JSON.stringify({
        jsonrpc: '2.0', id: 'b1', method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'on node B' } },
      }),
    });
    const text = await res.text();
    const data = text.startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data: {')).pop().slice(6);
    return { status: res.status, text: JSON.parse(data).result.content[0].text };
  });
  // An error the page can read: status, JSON-RPC body and the exposed headers.
  await step(out, 'unknownSession', async () => {
    const res = await fetch(nodeB, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${token}`,
        'Mcp-Session-Id': 'no-such-session',
        'MCP-Protocol-Version': transport.protocolVersion,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'x', method: 'tools/list' }),
    });
    return { status: res.status, body: await res.json() };
  });
  await step(out, 'toolError', async () => {
    const r = await client.callTool({ name: 'no_such_tool', arguments: {} });
    return r;
  });
  if (wideToken) {
    await step(out, 'stepUp', async () => stepUp(nodeA, nodeB, transport, token, wideToken));
  }
  await step(out, 'delete', async () => {
    await transport.terminateSession();
    return { sessionId: transport.sessionId ?? null };
  });
  await client.close();
  return out;
};

// A call the narrow token's scopes do not allow: 403 with the scope challenge, then the same
// session on the other node with a wider token.
async function stepUp(nodeA, nodeB, transport, token, wideToken) {
  const call = (node, t) =>
    fetch(node, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        Authorization: `Bearer ${t}`,
        'Mcp-Session-Id': transport.sessionId,
        'MCP-Protocol-Version': transport.protocolVersion,
      },
      body: JSON.stringify({
        jsonrpc: '2.0', id: 's1', method: 'tools/call',
        params: { name: 'add', arguments: { a: 1, b: 2 } },
      }),
    });
  const refused = await call(nodeA, token);
  const challenge = refused.headers.get('www-authenticate');
  const first = { status: refused.status, challenge, body: await refused.json() };
  const retried = await call(nodeB, wideToken);
  const text = await retried.text();
  const data = text.startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data: {')).pop().slice(6);
  return { first, retried: { status: retried.status, body: JSON.parse(data) } };
}

window.blocked = async (node) => {
  try {
    const res = await fetch(node, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    return { status: res.status };
  } catch (err) {
    return { error: String(err?.message ?? err) };
  }
};
