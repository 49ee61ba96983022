// What the SDK client scenarios share: a failed check, and the JSON-RPC facts of a request body
// the scenarios' fetch taps read to decide where each request goes.

/** Throws "check failed: <what>" unless `condition` holds. */
export function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
}

/** The JSON-RPC facts of a request body: method (or "response"), tool name, id. */
export function rpcOf(init) {
  if (typeof init?.body !== 'string') return {};
  try {
    const body = JSON.parse(init.body);
    const rpc = body.method ?? ('result' in body || 'error' in body ? 'response' : undefined);
    return { rpc, tool: rpc === 'tools/call' ? body.params?.name : undefined, id: body.id };
  } catch {
    return {};
  }
}
