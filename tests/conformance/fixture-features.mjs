// The tools, resources and prompts that the server scenarios of @modelcontextprotocol/conformance
// (0.1.16, `--suite all`) call, registered on one McpServer of the official TypeScript SDK.
// Names, arguments and answers follow each scenario's "Server Implementation Requirements".
//
// Server-to-client requests (sampling, elicitation) and notifications (log messages, progress)
// go through the handler's `extra`, so they belong to the tool call that caused them: over
// Streamable HTTP they travel on that call's POST stream.

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListToolsRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

// A 1x1 red PNG and a minimal WAV file.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

const SCHEMA_2020_12_TOOL = 'json_schema_2020_12_tool';
// Advertised verbatim (the SDK would rewrite a zod schema as draft-07).
const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
  additionalProperties: false,
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });

/** A new McpServer with every conformance feature registered. */
export function createFixtureServer() {
  const mcp = new McpServer(
    { name: 'switchboard-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  registerContentTools(mcp);
  registerStreamingTools(mcp);
  registerClientRequestTools(mcp);
  registerResources(mcp);
  registerPrompts(mcp);
  advertiseRawSchema(mcp);
  return mcp;
}

function registerContentTools(mcp) {
  mcp.registerTool('test_simple_text', { description: 'Returns simple text' }, async () =>
    text('This is a simple text response for testing.'),
  );
  mcp.registerTool('test_image_content', { description: 'Returns an image' }, async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  mcp.registerTool('test_audio_content', { description: 'Returns audio' }, async () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  }));
  const embedded = {
    uri: 'test://embedded-resource',
    mimeType: 'text/plain',
    text: 'This is an embedded resource content.',
  };
  mcp.registerTool('test_embedded_resource', { description: 'Returns a resource' }, async () => ({
    content: [{ type: 'resource', resource: embedded }],
  }));
  const mixed = {
    uri: 'test://mixed-content-resource',
    mimeType: 'application/json',
    text: JSON.stringify({ test: 'data', value: 123 }),
  };
  mcp.registerTool('test_multiple_content_types', { description: 'Text, image, resource' }, async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: mixed },
    ],
  }));
  mcp.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  const address = z.object({ street: z.string().optional(), city: z.string().optional() });
  mcp.registerTool(
    SCHEMA_2020_12_TOOL,
    {
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: { name: z.string().optional(), address: address.optional() },
    },
    async (args) => text(`Received: ${JSON.stringify(args)}`),
  );
}

function registerStreamingTools(mcp) {
  mcp.registerTool(
    'test_tool_with_logging',
    { description: 'Sends three info log messages', inputSchema: {} },
    async (_args, extra) => {
      const steps = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];
      for (const [i, data] of steps.entries()) {
        if (i > 0) await sleep(50);
        await extra.sendNotification({
          method: 'notifications/message',
          params: { level: 'info', logger: 'fixture', data },
        });
      }
      return text('Tool with logging executed successfully');
    },
  );
  mcp.registerTool(
    'test_tool_with_progress',
    { description: 'Reports progress 0, 50, 100 of 100', inputSchema: {} },
    async (_args, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (progress > 0) await sleep(50);
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress, total: 100, message: `${progress} of 100` },
          });
        }
      }
      return text(`Progress done (token ${JSON.stringify(progressToken ?? null)})`);
    },
  );
  mcp.registerTool(
    'test_reconnection',
    { description: 'Closes its SSE stream mid-call (SEP-1699), then answers', inputSchema: {} },
    async (_args, extra) => {
      // Only the Streamable HTTP transport with an event store offers closeSSEStream.
      extra.closeSSEStream?.();
      await sleep(100);
      return text('Reconnection test completed successfully');
    },
  );
}

function registerClientRequestTools(mcp) {
  mcp.registerTool(
    'test_sampling',
    { description: 'Asks the client to sample', inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      const params = {
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
        maxTokens: 100,
      };
      const result = await extra.sendRequest(
        { method: 'sampling/createMessage', params },
        CreateMessageResultSchema,
      );
      return text(`LLM response: ${result.content?.text ?? JSON.stringify(result.content)}`);
    },
  );
  const elicit = async (extra, message, properties, required) => {
    const params = { mode: 'form', message, requestedSchema: { type: 'object', properties, required } };
    const r = await extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema);
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  };
  mcp.registerTool(
    'test_elicitation',
    { description: 'Asks the user for input', inputSchema: { message: z.string() } },
    async ({ message }, extra) =>
      elicit(
        extra,
        message,
        {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        ['username', 'email'],
      ),
  );
  mcp.registerTool(
    'test_elicitation_sep1034_defaults',
    { description: 'Elicitation with defaults (SEP-1034)', inputSchema: {} },
    async (_args, extra) =>
      elicit(
        extra,
        'Please review the defaults',
        {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: {
            type: 'string',
            description: 'User status',
            enum: ['active', 'inactive', 'pending'],
            default: 'active',
          },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
        [],
      ),
  );
  mcp.registerTool(
    'test_elicitation_sep1330_enums',
    { description: 'Elicitation with every enum form (SEP-1330)', inputSchema: {} },
    async (_args, extra) => elicit(extra, 'Pick options', sep1330Properties(), []),
  );
}

function sep1330Properties() {
  const titled = (prefix, word) =>
    ['1', '2', '3'].map((n, i) => ({ const: `${prefix}${n}`, title: `${word[i]}` }));
  return {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string',
      oneOf: titled('value', ['First Option', 'Second Option', 'Third Option']),
    },
    legacyEnum: {
      type: 'string',
      enum: ['opt1', 'opt2', 'opt3'],
      enumNames: ['Option One', 'Option Two', 'Option Three'],
    },
    untitledMulti: {
      type: 'array',
      items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    },
    titledMulti: {
      type: 'array',
      items: { anyOf: titled('value', ['First Choice', 'Second Choice', 'Third Choice']) },
    },
  };
}

function registerResources(mcp) {
  const fixed = (name, uri, mimeType, body) =>
    mcp.registerResource(name, uri, { description: `${name} resource`, mimeType }, async () => ({
      contents: [{ uri, mimeType, ...body }],
    }));
  fixed('static-text', 'test://static-text', 'text/plain', {
    text: 'This is the content of the static text resource.',
  });
  fixed('static-binary', 'test://static-binary', 'image/png', { blob: PNG });
  fixed('watched-resource', 'test://watched-resource', 'text/plain', {
    text: 'Watched resource content',
  });
  mcp.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'Data for an id', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    }),
  );
  const subscriptions = new Set();
  mcp.server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    subscriptions.add(req.params.uri);
    return {};
  });
  mcp.server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscriptions.delete(req.params.uri);
    return {};
  });
}

function registerPrompts(mcp) {
  const user = (content) => ({ role: 'user', content });
  mcp.registerPrompt('test_simple_prompt', { description: 'A simple prompt' }, async () => ({
    messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })],
  }));
  const arg1 = completable(z.string().describe('First test argument'), (value) =>
    ['paris', 'park', 'party'].filter((v) => v.startsWith(value ?? '')),
  );
  mcp.registerPrompt(
    'test_prompt_with_arguments',
    { description: 'A prompt with two arguments', argsSchema: { arg1, arg2: z.string() } },
    async ({ arg1: a, arg2: b }) => ({
      messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${a}', arg2='${b}'` })],
    }),
  );
  mcp.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt embedding a resource', argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        user({
          type: 'resource',
          resource: {
            uri: resourceUri,
            mimeType: 'text/plain',
            text: 'Embedded resource content for testing.',
          },
        }),
        user({ type: 'text', text: 'Please process the embedded resource above.' }),
      ],
    }),
  );
  mcp.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      user({ type: 'image', data: PNG, mimeType: 'image/png' }),
      user({ type: 'text', text: 'Please analyze the image above.' }),
    ],
  }));
}

/** Replaces the SDK's generated schema of the 2020-12 tool with the verbatim one in tools/list. */
function advertiseRawSchema(mcp) {
  const generated = mcp.server._requestHandlers.get('tools/list');
  mcp.server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const result = await generated(request, extra);
    for (const tool of result.tools) {
      if (tool.name === SCHEMA_2020_12_TOOL) tool.inputSchema = SCHEMA_2020_12;
    }
    return result;
  });
}
