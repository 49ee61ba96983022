// Drives replicas of switchboard-rmcp's `replicated` example (the conformance tools) with the
// official MCP TypeScript SDK client, unmodified: one `Client` + `StreamableHTTPClientTransport`
// whose custom `fetch` sends each HTTP request to a chosen replica:
//
//   initialize → A, tools/list → B, test_simple_text → C,
//   test_tool_with_progress → A, its stream cut after the first progress event, as a dropped
//     connection would be; the SDK resumes it with Last-Event-ID, sent to B,
//   test_sampling → C; the client's sampling answer is POSTed to A,
//   anything else round robin.
//
// Every SSE event the client receives is recorded (id and message) with the request that carried
// it, so the Rust test can hold what the client saw against the replicas' event log in Redis. The
// session is left open (no DELETE): the test reads its logs first, then ends it.
//
// Usage: node rmcp_replicated_scenario.mjs <url-A> <url-B> <url-C>. Prints one JSON summary line
// on stdout; exits 0 only when every check here passed.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, rpcOf } from './requests.mjs';

const urls = process.argv.slice(2);
const OVERALL_LIMIT_MS = 60_000;
const SAMPLED_TEXT = 'sampled by the TS SDK';

const summary = { ok: false, urls, requests: [], errors: [] };
const requests = summary.requests;
const calls = {}; // tool name → replica of its POST
let cut = null; // { seq, node, afterEventId } once the progress call's stream was cut

function finish(ok, error) {
  summary.ok = ok;
  if (error) summary.error = String(error?.stack ?? error);
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(ok ? 0 : 1);
}

function chooseNode(seq, http, rpc, tool, lastEventId) {
  const n = urls.length;
  if (http === 'POST' && rpc === 'initialize') return 0;
  if (rpc === 'tools/list') return 1;
  if (tool === 'test_simple_text') return 2;
  if (tool === 'test_tool_with_progress') return 0;
  if (tool === 'test_sampling') return 2;
  if (http === 'GET' && lastEventId && cut) return (cut.node + 1) % n;
  if (rpc === 'response' && calls.test_sampling !== undefined) return (calls.test_sampling + 1) % n;
  return seq % n;
}

/** One SSE event block (LF line ends) as { id, message }; null for events without data. */
function parseEvent(block) {
  let id;
  const data = [];
  for (const line of block.split('\n')) {
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = value;
    if (field === 'data') data.push(value);
  }
  const text = data.join('\n');
  return { id, message: text.trim() === '' ? null : JSON.parse(text) };
}

/**
 * A copy of `response` whose events are recorded in `entry.events`; with `cutAfterProgress`,
 * its body errors out right after the first progress notification, as a dropped connection:
 * on the read after the one that delivered it (no chunk is queued ahead of the reader, so the
 * SDK has taken the event before the error). Which event the SDK last processed is what its
 * resumption's Last-Event-ID says; the Rust test goes by that.
 */
function tapped(response, entry, cutAfterProgress) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffer = '';
  let cutNext = false;
  entry.events = [];
  const body = new ReadableStream({
    async pull(controller) {
      if (cutNext) {
        await reader.cancel('connection cut by the test').catch(() => {});
        controller.error(new TypeError('terminated: connection cut by the test'));
        return;
      }
      const { value, done } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end + 2);
        buffer = buffer.slice(end + 2);
        controller.enqueue(encoder.encode(block));
        const event = parseEvent(block.trimEnd());
        if (event.message === null) continue;
        entry.events.push(event);
        if (cutAfterProgress && event.message.method === 'notifications/progress') {
          cut = { seq: entry.seq, node: entry.node, afterEventId: event.id };
          cutNext = true;
          return;
        }
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    }
  }, { highWaterMark: 0 });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** Fetches sent and not answered yet (their response headers). */
const unanswered = new Set();

async function routedFetch(input, init = {}) {
  const http = (init.method ?? 'GET').toUpperCase();
  const headers = new Headers(init.headers);
  const lastEventId = headers.get('last-event-id') ?? undefined;
  const { rpc, tool, id } = rpcOf(init);
  const seq = requests.length;
  const node = chooseNode(seq, http, rpc, tool, lastEventId);
  if (tool) calls[tool] = node;
  const entry = { seq, http, rpc, tool, id, lastEventId, node };
  requests.push(entry);
  // Tracked until answered: the SDK sends a sampling answer without awaiting its 202, and the
  // call's result can come before it, so the summary waits for every POST's status.
  const answered = fetch(new URL(urls[node]), init);
  unanswered.add(answered);
  let response;
  try {
    response = await answered;
  } finally {
    unanswered.delete(answered);
  }
  entry.status = response.status;
  const isSse = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
  if (!isSse || !response.body) return response;
  const cutThis = tool === 'test_tool_with_progress' && cut === null;
  return tapped(response, entry, cutThis);
}

async function main() {
  check(urls.length === 3, `need three replica URLs, got ${JSON.stringify(urls)}`);
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), {
    fetch: routedFetch,
    reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 5000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 }
  });
  const client = new Client({ name: 'switchboard-rmcp-ts-sdk-test', version: '0.0.0' }, { capabilities: { sampling: {} } });
  client.onerror = e => summary.errors.push(String(e?.message ?? e));
  client.setRequestHandler(CreateMessageRequestSchema, async request => {
    summary.samplingPrompt = request.params.messages?.[0]?.content?.text;
    return { role: 'assistant', content: { type: 'text', text: SAMPLED_TEXT }, model: 'test-model' };
  });

  await client.connect(transport);
  summary.sessionId = transport.sessionId;
  summary.protocolVersion = transport.protocolVersion;
  summary.serverName = client.getServerVersion()?.name;
  check(typeof summary.sessionId === 'string' && summary.sessionId.length > 0, 'a session id after connect');

  const tools = await client.listTools();
  summary.tools = tools.tools.map(t => t.name);
  for (const name of ['test_simple_text', 'test_tool_with_progress', 'test_sampling']) check(summary.tools.includes(name), `tools/list has ${name}`);

  const simple = await client.callTool({ name: 'test_simple_text', arguments: {} });
  summary.simpleText = simple.content?.map(c => c.text).join('\n');

  const progress = [];
  const result = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
    onprogress: p => progress.push(p.progress),
    timeout: 30_000
  });
  summary.progress = progress;
  summary.progressResult = result.content?.map(c => c.text).join('\n');
  summary.cut = cut;
  check(cut !== null, 'the progress call\'s stream was cut');
  check(JSON.stringify(progress) === '[0,50,100]', `progress 0, 50, 100 once each, in order: ${JSON.stringify(progress)}`);

  const sampled = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'Say hi' } }, undefined, { timeout: 30_000 });
  summary.samplingResult = sampled.content?.map(c => c.text).join('\n');
  check(summary.samplingResult === `LLM response: ${SAMPLED_TEXT}`, `sampling result ${JSON.stringify(sampled)}`);

  await Promise.allSettled([...unanswered]);
  await client.close();
}

setTimeout(() => finish(false, `scenario not finished within ${OVERALL_LIMIT_MS} ms`), OVERALL_LIMIT_MS);
main().then(() => finish(true), e => finish(false, e));
