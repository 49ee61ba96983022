// Drives a Switchboard cluster with the official MCP TypeScript SDK's legacy HTTP+SSE client
// transport (`SSEClientTransport`, MCP 2024-11-05), unmodified: it GETs the SSE endpoint (through a
// load balancer), reads the `endpoint` event and POSTs every message to that URL, so the balancer
// spreads the POSTs over the nodes while the answers come back on the one SSE connection.
// The custom `fetch` only records each HTTP exchange (method, status, and `X-Served-By`, the
// backend the balancer chose); it does not change where requests go.
//
// Scenario: connect (initialize + initialized), tools/list, six echo calls, and a `sample` call
// whose sampling/createMessage request the client answers (by a POST the balancer may send to
// another node), then close.
//
// Usage: node legacy_sse_scenario.mjs <sse-url>. Prints one JSON summary line on stdout; exits 0
// only when every check passed.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { check } from './requests.mjs';

const sseUrl = process.argv[2];
const OVERALL_LIMIT_MS = 50_000;
const summary = { ok: false, sseUrl, exchanges: [], echoes: [] };

function finish(ok, error) {
  summary.ok = ok;
  if (error) summary.error = String(error?.stack ?? error);
  const posts = summary.exchanges.filter(e => e.method === 'POST');
  summary.postNodes = [...new Set(posts.map(e => e.servedBy))].sort();
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(ok ? 0 : 1);
}

async function recordingFetch(url, init) {
  const response = await fetch(url, init);
  summary.exchanges.push({
    method: init?.method ?? 'GET',
    url: String(url),
    status: response.status,
    servedBy: response.headers.get('x-served-by'),
  });
  return response;
}

async function main() {
  const transport = new SSEClientTransport(new URL(sseUrl), { fetch: recordingFetch });
  const client = new Client(
    { name: 'switchboard-legacy-sse-test', version: '0.0.0' },
    { capabilities: { sampling: {} } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async request => {
    summary.samplingPrompt = request.params.messages?.[0]?.content?.text;
    return { role: 'assistant', content: { type: 'text', text: 'Paris.' }, model: 'ts-sdk' };
  });
  await client.connect(transport);
  summary.serverName = client.getServerVersion()?.name;
  const tools = await client.listTools();
  summary.tools = tools.tools.map(t => t.name).sort();
  for (let i = 0; i < 6; i++) {
    const result = await client.callTool({ name: 'echo', arguments: { text: `legacy-${i}` } });
    summary.echoes.push(result.content?.[0]?.text);
  }
  const sampled = await client.callTool({ name: 'sample', arguments: { prompt: 'Capital of France?' } });
  summary.sampleText = sampled.content?.map(c => c.text).join('\n');
  const post = summary.exchanges.find(e => e.method === 'POST');
  summary.sessionId = post ? new URL(post.url).searchParams.get('sessionId') : null;
  await client.close();

  check(summary.tools.includes('echo') && summary.tools.includes('sample'), 'tools/list has echo and sample');
  check(summary.echoes.every((t, i) => t === `legacy-${i}`), 'every echo came back in order');
  check(summary.samplingPrompt === 'Capital of France?', 'the sampling request reached the client');
  check(summary.sampleText?.includes('Paris.'), 'the sample tool got the client\'s answer');
  check(summary.exchanges.filter(e => e.method === 'POST').every(e => e.status === 202), 'every POST got 202');
}

const timer = setTimeout(() => finish(false, `scenario not finished within ${OVERALL_LIMIT_MS} ms`), OVERALL_LIMIT_MS);
main().then(() => { clearTimeout(timer); finish(true); }, e => { clearTimeout(timer); finish(false, e); });
