"""The official Python MCP client (`mcp` 2.x: `Client` = `ClientSession` over the streamable HTTP
client) against a Switchboard endpoint: connect in the default mode 'auto' (probe
`server/discover`, fall back to `initialize`), list the tools, call `add`; with `--calculator`
also the calculator's other three operations and a division by zero.

    python client_scenario.py URL [TOOL_PREFIX] [--calculator]

Prints one JSON summary line on stdout: the HTTP exchanges (method, JSON-RPC method, status,
error body of 4xx answers, milliseconds), which handshake was used, the negotiated revision,
the tool names and the text of `add(2, 3.5)`; with `--calculator`, `calculator` maps each call
(`subtract`, `multiply`, `divide`, `divideByZero`) to its `isError`, text and structured result.
Exit code 0 when that all worked (the division by zero must be a tool error).
"""

import json
import sys
import time

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def recorder(exchanges: list[dict]):
    started: dict[int, float] = {}

    async def on_request(request: httpx2.Request) -> None:
        started[id(request)] = time.monotonic()
        entry = {"http": request.method, "headers": {}}
        for name in ("mcp-protocol-version", "mcp-session-id", "mcp-method"):
            if name in request.headers:
                entry["headers"][name] = request.headers[name]
        try:
            body = json.loads(request.content or b"null")
            if isinstance(body, dict):
                entry["rpc"] = body.get("method") or ("response" if "id" in body else None)
        except (ValueError, httpx2.RequestNotRead):
            pass
        request.extensions["sb_entry"] = entry
        exchanges.append(entry)

    async def on_response(response: httpx2.Response) -> None:
        entry = response.request.extensions.get("sb_entry", {})
        entry["status"] = response.status_code
        entry["contentType"] = response.headers.get("content-type")
        entry["ms"] = round((time.monotonic() - started.pop(id(response.request), time.monotonic())) * 1000)
        if response.status_code >= 400:
            await response.aread()
            entry["body"] = response.text

    return {"request": [on_request], "response": [on_response]}


async def call(client: Client, name: str, arguments: dict) -> dict:
    """One tool call's outcome as JSON: isError, the text content, the structured content."""
    result = await client.call_tool(name, arguments)
    text = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return {"isError": bool(result.is_error), "text": text, "structured": result.structured_content}


async def calculator_calls(client: Client, prefix: str) -> dict:
    """The calculator's other operations, then a division by zero (a tool error)."""
    return {
        "subtract": await call(client, f"{prefix}subtract", {"a": 10, "b": 4.5}),
        "multiply": await call(client, f"{prefix}multiply", {"a": 6, "b": 7}),
        "divide": await call(client, f"{prefix}divide", {"a": 1, "b": 8}),
        "divideByZero": await call(client, f"{prefix}divide", {"a": 1, "b": 0}),
    }


async def scenario(url: str, prefix: str, calculator: bool) -> dict:
    exchanges: list[dict] = []
    summary: dict = {"ok": False, "exchanges": exchanges}
    http = create_mcp_http_client()
    http.event_hooks = recorder(exchanges)
    async with http:
        t0 = time.monotonic()
        async with Client(streamable_http_client(url, http_client=http), mode="auto") as client:
            summary["connectMs"] = round((time.monotonic() - t0) * 1000)
            session = client.session
            summary["handshake"] = "initialize" if session.initialize_result is not None else "discover"
            summary["protocolVersion"] = session.protocol_version
            info = session.server_info
            summary["serverName"] = info.name if info else None
            tools = await client.list_tools()
            summary["tools"] = sorted(t.name for t in tools.tools)
            result = await client.call_tool(f"{prefix}add", {"a": 2, "b": 3.5})
            summary["addIsError"] = bool(result.is_error)
            summary["addText"] = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            summary["addStructured"] = result.structured_content
            if calculator:
                summary["calculator"] = await calculator_calls(client, prefix)
    summary["ok"] = not summary["addIsError"]
    calls = summary.get("calculator")
    if calls:
        # The three operations succeed; only the division by zero is a tool error.
        errors = {name: c["isError"] for name, c in calls.items()}
        summary["ok"] &= errors == {"subtract": False, "multiply": False, "divide": False, "divideByZero": True}
    return summary


def main() -> int:
    calculator = "--calculator" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != "--calculator"]
    url = args[0]
    prefix = args[1] if len(args) > 1 else ""
    try:
        summary = anyio.run(scenario, url, prefix, calculator)
    except BaseException as exc:  # noqa: BLE001 - report anything as the summary
        summary = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if isinstance(exc, BaseExceptionGroup):
            summary["errors"] = [f"{type(e).__name__}: {e}" for e in exc.exceptions]
    print(json.dumps(summary))
    return 0 if summary.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
