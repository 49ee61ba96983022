"""The OpenAI Agents SDK's MCP clients (`openai-agents`, its `agents.mcp` classes used directly: no
model, no API key) against a Switchboard endpoint: `MCPServerStreamableHttp` on the Streamable
HTTP URL and `MCPServerSse` on the legacy HTTP+SSE URL each connect, list the tools and call
`echo` and `add`.

    python agents_scenario.py STREAMABLE_URL SSE_URL

Prints one JSON summary line on stdout: per client (`streamableHttp`, `sse`) the negotiated
revision and server name, the sorted tool names, the text of `echo` and `add(2, 3.5)`, and for
every HTTP exchange its method, path, JSON-RPC method, `MCP-Protocol-Version`, status and
`X-Served-By` (the balancer's backend), in order. Exit code 0
when both clients got through.
"""

import asyncio
import json
import sys

import httpx2
from agents.mcp import MCPServerSse, MCPServerStreamableHttp


def recording_factory(answers: list[dict]):
    """An `httpx_client_factory` whose clients note each answer's status and serving backend."""

    async def on_response(response: httpx2.Response) -> None:
        request = response.request
        entry = {
            "http": request.method,
            "path": request.url.path,
            "revision": request.headers.get("mcp-protocol-version"),
            "status": response.status_code,
            "servedBy": response.headers.get("x-served-by"),
        }
        try:
            body = json.loads(request.content or b"null")
            if isinstance(body, dict):
                entry["rpc"] = body.get("method") or ("response" if "id" in body else None)
        except (ValueError, httpx2.RequestNotRead):
            pass
        answers.append(entry)

    def factory(headers=None, timeout=None, auth=None) -> httpx2.AsyncClient:
        kwargs = {"follow_redirects": False, "event_hooks": {"response": [on_response]}}
        if headers is not None:
            kwargs["headers"] = headers
        if timeout is not None:
            kwargs["timeout"] = timeout
        if auth is not None:
            kwargs["auth"] = auth
        return httpx2.AsyncClient(**kwargs)

    return factory


def text_of(result) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def drive(server_class, url: str) -> dict:
    """Connect with one of the SDK's MCP server classes, list the tools, call two of them."""
    answers: list[dict] = []
    out: dict = {"ok": False, "answers": answers}
    params = {"url": url, "timeout": 10, "httpx_client_factory": recording_factory(answers)}
    server = server_class(params, name=server_class.__name__, client_session_timeout_seconds=20)
    try:
        await server.connect()
        init = server.server_initialize_result
        out["protocolVersion"] = getattr(init, "protocol_version", None)
        info = getattr(init, "server_info", None)
        out["serverName"] = info.name if info else None
        tools = await server.list_tools()
        out["tools"] = sorted(t.name for t in tools)
        echo = await server.call_tool("echo", {"text": f"agents-{server_class.__name__}"})
        out["echo"] = {"isError": bool(echo.is_error), "text": text_of(echo)}
        add = await server.call_tool("add", {"a": 2, "b": 3.5})
        out["add"] = {"isError": bool(add.is_error), "text": text_of(add)}
        out["ok"] = not echo.is_error and not add.is_error
    finally:
        await server.cleanup()
    return out


async def scenario(streamable_url: str, sse_url: str) -> dict:
    summary: dict = {"ok": False}
    for key, server_class, url in (
        ("streamableHttp", MCPServerStreamableHttp, streamable_url),
        ("sse", MCPServerSse, sse_url),
    ):
        try:
            summary[key] = await asyncio.wait_for(drive(server_class, url), timeout=60)
        except BaseException as exc:  # noqa: BLE001 - report anything in the summary
            summary[key] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            if isinstance(exc, BaseExceptionGroup):
                summary[key]["errors"] = [f"{type(e).__name__}: {e}" for e in exc.exceptions]
    summary["ok"] = summary["streamableHttp"]["ok"] and summary["sse"]["ok"]
    return summary


def main() -> int:
    summary = asyncio.run(scenario(sys.argv[1], sys.argv[2]))
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
