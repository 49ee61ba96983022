// Case C46 with a client of the 2024-11-05 era: the official TypeScript SDK 1.9.0 (pinned in
// package.json as `sdk-2024`), whose schemas know only the content types and tool fields of
// 2024-11-05, over its legacy HTTP+SSE transport. It connects, lists the tools and calls one
// whose upstream answers with 2025-06-18 constructs (resource_link, audio, structuredContent).
// The SDK validates every result against its own schema, so an unconverted block fails the call
// (ZodError, invalid_union).
//
// Usage: node sdk_2024_scenario.mjs <sse-url> <tool>. Prints one JSON summary line on stdout;
// exits 0 only when the call succeeded.

import { Client } from 'sdk-2024/client/index.js';
import { SSEClientTransport } from 'sdk-2024/client/sse.js';

const [sseUrl, tool] = process.argv.slice(2);
const summary = { ok: false, sseUrl, tool };

function finish(ok, error) {
  summary.ok = ok;
  if (error) summary.error = String(error?.stack ?? error);
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(ok ? 0 : 1);
}

setTimeout(() => finish(false, 'timed out after 30 s'), 30_000).unref();

try {
  const client = new Client({ name: 'sdk-1.9.0-c46', version: '0' });
  await client.connect(new SSEClientTransport(new URL(sseUrl)));
  summary.serverVersion = client.getServerVersion();
  const { tools } = await client.listTools();
  summary.tool_fields = Object.keys(tools.find(t => t.name === tool) ?? {}).sort();
  const result = await client.callTool({ name: tool, arguments: {} });
  summary.contentTypes = result.content.map(c => c.type);
  summary.content = result.content;
  await client.close();
  finish(true);
} catch (e) {
  finish(false, e);
}
