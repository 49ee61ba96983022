// Drives a Switchboard cluster with the official MCP TypeScript SDK client, unmodified: one
// `Client` + `StreamableHTTPClientTransport` whose custom `fetch` sends each HTTP request to a
// chosen node (initialize → A, tools/list → B, echo → C, countdown → A, the resumption GET → the
// node after A, anything else round-robin). Mid-`countdown` the fetch cuts the SSE body after two
// progress events, as a dropped connection would; the SDK must resume with Last-Event-ID on
// another node and still get every progress notification and the result.
//
// Usage: node client_scenario.mjs <node-url> <node-url> [<node-url> …]
//        (or SWITCHBOARD_URLS="url,url,url"). Prints one JSON summary line on stdout; exits 0
//        only when every check passed.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { check, rpcOf } from './requests.mjs';

const urls = process.argv.length > 2 ? process.argv.slice(2) : (process.env.SWITCHBOARD_URLS ?? '').split(',').filter(Boolean);
const COUNTDOWN_N = 6;
const COUNTDOWN_INTERVAL_MS = 300;
const CUT_AFTER_PROGRESS = 2;
const OVERALL_LIMIT_MS = 60_000;

const summary = { ok: false, urls, requests: [], errors: [] };
const requests = summary.requests;
let cut = null; // { node, progressBeforeCut } once the countdown's stream was cut
let countdownNode = null;

function finish(ok, error) {
  summary.ok = ok;
  if (error) summary.error = String(error?.stack ?? error);
  const nodes = new Set(requests.map(r => r.node));
  summary.distinctNodes = [...nodes].sort();
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(ok ? 0 : 1);
}

function chooseNode(seq, http, rpc, tool, lastEventId) {
  const n = urls.length;
  if (http === 'POST' && rpc === 'initialize') return 0;
  if (rpc === 'tools/list') return 1 % n;
  if (rpc === 'tools/call' && tool === 'echo') return 2 % n;
  if (rpc === 'tools/call' && tool === 'countdown') return 0;
  if (http === 'GET' && lastEventId && countdownNode !== null) return (countdownNode + 1) % n;
  return seq % n;
}

/** A copy of `response` whose body errors out right after the `after`-th progress event. */
function cutAfterProgress(response, after, onCut) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let buffer = '';
  let progress = 0;
  const body = new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end + 2);
        buffer = buffer.slice(end + 2);
        controller.enqueue(encoder.encode(event));
        if (/^data:.*"notifications\/progress"/m.test(event) && ++progress === after) {
          onCut(progress);
          await reader.cancel('connection cut by the test').catch(() => {});
          controller.error(new TypeError('terminated: connection cut by the test'));
          return;
        }
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    }
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** Fetches sent and not answered yet (their response headers). */
const unanswered = new Set();

async function routedFetch(input, init = {}) {
  const http = (init.method ?? 'GET').toUpperCase();
  const headers = new Headers(init.headers);
  const lastEventId = headers.get('last-event-id') ?? undefined;
  const { rpc, tool } = rpcOf(init);
  const seq = requests.length;
  const node = chooseNode(seq, http, rpc, tool, lastEventId);
  if (rpc === 'tools/call' && tool === 'countdown') countdownNode = node;
  const entry = { seq, http, rpc, tool, lastEventId, node };
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
  if (tool === 'countdown' && isSse && cut === null && response.body) {
    cut = { node, progressBeforeCut: null };
    return cutAfterProgress(response, CUT_AFTER_PROGRESS, k => (cut.progressBeforeCut = k));
  }
  return response;
}

async function main() {
  check(urls.length >= 2, `need at least two node URLs, got ${JSON.stringify(urls)}`);
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), {
    fetch: routedFetch,
    reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 5000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 }
  });
  const client = new Client({ name: 'switchboard-ts-sdk-test', version: '0.0.0' }, { capabilities: {} });
  client.onerror = e => summary.errors.push(String(e?.message ?? e));

  await client.connect(transport);
  summary.sessionId = transport.sessionId;
  summary.protocolVersion = transport.protocolVersion;
  summary.serverName = client.getServerVersion()?.name;
  check(typeof summary.sessionId === 'string' && summary.sessionId.length > 0, 'a session id after connect');

  const tools = await client.listTools();
  summary.tools = tools.tools.map(t => t.name);
  for (const name of ['echo', 'add', 'countdown', 'sample', 'notify']) check(summary.tools.includes(name), `tools/list has ${name}`);

  const echoed = await client.callTool({ name: 'echo', arguments: { text: 'ts-sdk-hello' } });
  summary.echo = echoed.content?.map(c => c.text).join('\n');
  check(summary.echo === 'ts-sdk-hello', `echo answered ${JSON.stringify(echoed)}`);

  const progress = [];
  const result = await client.callTool(
    { name: 'countdown', arguments: { n: COUNTDOWN_N, interval_ms: COUNTDOWN_INTERVAL_MS } },
    undefined,
    { onprogress: p => progress.push(p.progress), timeout: 30_000 }
  );
  summary.progress = progress;
  summary.progressCount = progress.length;
  summary.countdownResult = result.content?.map(c => c.text).join('\n');
  summary.cut = cut;
  summary.resumes = requests.filter(r => r.http === 'GET' && r.lastEventId);
  check(cut?.progressBeforeCut === CUT_AFTER_PROGRESS, `the countdown stream was cut after ${CUT_AFTER_PROGRESS} progress events`);
  check(summary.resumes.length >= 1, 'the SDK resumed with Last-Event-ID');
  check(summary.resumes.every(r => r.node !== cut.node && r.status === 200), 'resumed on another node with 200');
  check(JSON.stringify(progress) === JSON.stringify([...Array(COUNTDOWN_N).keys()].map(k => k + 1)), `progress 1..${COUNTDOWN_N} once each, in order: ${JSON.stringify(progress)}`);
  check(summary.countdownResult === 'countdown finished', `countdown result ${JSON.stringify(result)}`);

  await transport.terminateSession();
  summary.terminated = transport.sessionId === undefined;
  await Promise.allSettled([...unanswered]);
  await client.close();
  summary.nodeOf = Object.fromEntries(
    ['initialize', 'tools/list'].map(m => [m, requests.find(r => r.rpc === m)?.node]).concat(
      ['echo', 'countdown'].map(t => [t, requests.find(r => r.tool === t)?.node])
    )
  );
}

setTimeout(() => finish(false, `scenario not finished within ${OVERALL_LIMIT_MS} ms`), OVERALL_LIMIT_MS);
main().then(() => finish(true), e => finish(false, e));
