"""The official Python MCP client (`mcp` 2.x: `Client` over the streamable HTTP client, mode
'legacy': the initialize handshake) against three replicas of switchboard-rmcp's `replicated`
example. An httpx2 transport sends each HTTP request to a chosen replica:

    initialize -> A, tools/list -> B, test_simple_text -> C,
    test_tool_with_progress -> A, its stream cut after the first progress event (a dropped
        connection); the SDK resumes it with Last-Event-ID, sent to B,
    test_sampling -> C; the client's sampling answer is POSTed to A,
    anything else round robin.

Every SSE event the client receives is recorded (id and message) with the request that carried
it, so the Rust test can hold what the client saw against the replicas' event log in Redis. The
session is left open (no DELETE on close): the test reads its logs first, then ends it.

    python rmcp_replicated_scenario.py URL_A URL_B URL_C

Prints one JSON summary line on stdout (the shape of tests/ts/rmcp_replicated_scenario.mjs's);
exit code 0 when every check here passed.
"""

import json
import sys

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

SAMPLED_TEXT = "sampled by the Python SDK"
OVERALL_LIMIT_S = 60


class Cut(httpx2.ReadError):
    """The connection drop the test makes."""


def parse_event(block: str) -> dict | None:
    """One SSE event block (LF line ends) as {id, message}; None for events without data."""
    event_id, data = None, []
    for line in block.split("\n"):
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            event_id = value
        elif field == "data":
            data.append(value)
    text = "\n".join(data)
    if not text.strip():
        return None
    return {"id": event_id, "message": json.loads(text)}


class TappedStream(httpx2.AsyncByteStream):
    """A response body whose events are recorded in `entry["events"]`; with `cut_after_progress`,
    it fails like a dropped connection right after the first progress notification."""

    def __init__(self, inner: httpx2.AsyncByteStream, entry: dict, state: dict, cut_after_progress: bool):
        self.inner, self.entry, self.state, self.cut = inner, entry, state, cut_after_progress
        entry["events"] = []

    async def __aiter__(self):
        buffer = ""
        async for chunk in self.inner:
            buffer += chunk.decode().replace("\r\n", "\n").replace("\r", "\n")
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                # Recorded before it is handed on: the SDK stops reading after a response.
                event = parse_event(block)
                if event is not None:
                    self.entry["events"].append(event)
                yield (block + "\n\n").encode()
                if event and self.cut and event["message"].get("method") == "notifications/progress":
                    self.state["cut"] = {"seq": self.entry["seq"], "node": self.entry["node"], "afterEventId": event["id"]}
                    raise Cut("connection cut by the test")
        if buffer:
            yield buffer.encode()

    async def aclose(self) -> None:
        await self.inner.aclose()


class Router(httpx2.AsyncBaseTransport):
    """Sends each request to the replica the scenario names, recording it."""

    def __init__(self, urls: list[str], requests: list[dict], state: dict):
        self.urls, self.requests, self.state = urls, requests, state
        self.inner = httpx2.AsyncHTTPTransport()
        self.calls: dict[str, int] = {}

    def choose(self, seq: int, http: str, rpc, tool, last_event_id) -> int:
        n = len(self.urls)
        if http == "POST" and rpc == "initialize":
            return 0
        if rpc == "tools/list":
            return 1
        if tool in ("test_simple_text", "test_sampling"):
            return 2
        if tool == "test_tool_with_progress":
            return 0
        if http == "GET" and last_event_id and self.state.get("cut"):
            return (self.state["cut"]["node"] + 1) % n
        if rpc == "response" and "test_sampling" in self.calls:
            return (self.calls["test_sampling"] + 1) % n
        return seq % n

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        rpc = tool = rid = None
        try:
            body = json.loads(await request.aread() or b"null")
            if isinstance(body, dict):
                rpc = body.get("method") or ("response" if "result" in body or "error" in body else None)
                tool = (body.get("params") or {}).get("name") if rpc == "tools/call" else None
                rid = body.get("id")
        except ValueError:
            pass
        last_event_id = request.headers.get("last-event-id")
        seq = len(self.requests)
        node = self.choose(seq, request.method, rpc, tool, last_event_id)
        if tool:
            self.calls[tool] = node
        entry = {"seq": seq, "http": request.method, "rpc": rpc, "tool": tool, "id": rid, "node": node}
        if last_event_id:
            entry["lastEventId"] = last_event_id
        self.requests.append(entry)
        target = httpx2.URL(self.urls[node])
        request.url = target
        request.headers["host"] = f"{target.host}:{target.port}"
        response = await self.inner.handle_async_request(request)
        entry["status"] = response.status_code
        if rpc == "initialize":
            entry["sessionId"] = response.headers.get("mcp-session-id")
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        cut_this = tool == "test_tool_with_progress" and "cut" not in self.state
        stream = TappedStream(response.stream, entry, self.state, cut_this)
        return httpx2.Response(
            response.status_code, headers=response.headers, stream=stream, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def scenario(urls: list[str]) -> dict:
    requests: list[dict] = []
    state: dict = {}
    summary: dict = {"ok": False, "urls": urls, "requests": requests}

    async def sampling(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        summary["samplingPrompt"] = params.messages[0].content.text
        content = types.TextContent(type="text", text=SAMPLED_TEXT)
        return types.CreateMessageResult(role="assistant", content=content, model="test-model")

    timeout = httpx2.Timeout(30.0, read=300.0)
    http = httpx2.AsyncClient(transport=Router(urls, requests, state), timeout=timeout)
    transport = streamable_http_client(urls[0], http_client=http, terminate_on_close=False)
    async with http, Client(transport, mode="legacy", sampling_callback=sampling) as client:
        session = client.session
        summary["protocolVersion"] = session.protocol_version
        summary["serverName"] = session.server_info.name if session.server_info else None
        summary["sessionId"] = next(r for r in requests if r["rpc"] == "initialize").get("sessionId")
        tools = await client.list_tools()
        summary["tools"] = [t.name for t in tools.tools]
        summary["simpleText"] = text_of(await client.call_tool("test_simple_text", {}))

        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        result = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        summary["progress"] = progress
        summary["progressResult"] = text_of(result)
        summary["cut"] = state.get("cut")
        sampled = await client.call_tool("test_sampling", {"prompt": "Say hi"})
        summary["samplingResult"] = text_of(sampled)
    summary["ok"] = (
        summary["cut"] is not None
        and progress == [0, 50, 100]
        and summary["samplingResult"] == f"LLM response: {SAMPLED_TEXT}"
    )
    return summary


async def bounded(urls: list[str]) -> dict:
    with anyio.fail_after(OVERALL_LIMIT_S):
        return await scenario(urls)


def main() -> int:
    try:
        summary = anyio.run(bounded, sys.argv[1:4])
    except BaseException as exc:  # noqa: BLE001 - report anything as the summary
        summary = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if isinstance(exc, BaseExceptionGroup):
            summary["errors"] = [f"{type(e).__name__}: {e}" for e in exc.exceptions]
    print(json.dumps(summary))
    return 0 if summary.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
