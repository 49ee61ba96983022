#!/usr/bin/env node
// The conformance fixture upstream: every tool, resource and prompt the conformance suite's server
// scenarios call (see fixture-features.mjs), served by the official TypeScript SDK.
//
//   node fixture-server.mjs stdio        newline-delimited JSON-RPC on stdin/stdout
//   node fixture-server.mjs http PORT    Streamable HTTP on http://127.0.0.1:PORT/mcp (PORT 0: any)
//
// Over HTTP every session gets its own McpServer and transport, with an in-memory event store (so
// streams are resumable with Last-Event-ID and POST streams start with a priming event) and the
// SDK's DNS-rebinding protection for a loopback listener. Once listening it prints one line
// `listening http://127.0.0.1:PORT/mcp` on stdout. Logs go to stderr.

import { randomUUID } from 'node:crypto';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { createFixtureServer } from './fixture-features.mjs';

const [mode, portArg] = process.argv.slice(2);

if (mode === 'stdio') {
  await createFixtureServer().connect(new StdioServerTransport());
  console.error('fixture: serving on stdio');
} else if (mode === 'http') {
  serveHttp(Number(portArg ?? 0));
} else {
  console.error('usage: fixture-server.mjs stdio | http PORT');
  process.exit(2);
}

/** An event store kept in memory: event ids are `<stream id>_<sequence>`. */
function memoryEventStore() {
  const streams = new Map();
  let sequence = 0;
  return {
    async storeEvent(streamId, message) {
      const eventId = `${streamId}_${String(++sequence).padStart(10, '0')}`;
      if (!streams.has(streamId)) streams.set(streamId, []);
      streams.get(streamId).push({ eventId, message });
      return eventId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const streamId = lastEventId.slice(0, lastEventId.lastIndexOf('_'));
      for (const { eventId, message } of streams.get(streamId) ?? []) {
        // The priming event (an empty message) is not replayed.
        if (eventId > lastEventId && Object.keys(message).length > 0) await send(eventId, message);
      }
      return streamId;
    },
  };
}

function rpcError(res, status, message) {
  res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

function serveHttp(port) {
  const app = createMcpExpressApp({ host: '127.0.0.1' });
  const transports = new Map();
  const eventStore = memoryEventStore();

  app.post('/mcp', async (req, res) => {
    const sid = req.header('mcp-session-id');
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) return rpcError(res, 404, 'Session not found');
      if (!isInitializeRequest(req.body)) return rpcError(res, 400, 'No session: initialize first');
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore,
        retryInterval: 500,
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await createFixtureServer().connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
  });
  const bySession = async (req, res) => {
    const transport = transports.get(req.header('mcp-session-id') ?? '');
    if (!transport) return rpcError(res, req.header('mcp-session-id') ? 404 : 400, 'Session not found');
    await transport.handleRequest(req, res);
  };
  app.get('/mcp', bySession);
  app.delete('/mcp', bySession);

  const server = app.listen(port, '127.0.0.1', () => {
    console.log(`listening http://127.0.0.1:${server.address().port}/mcp`);
  });
  const stop = () => {
    for (const t of transports.values()) t.close().catch(() => {});
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
