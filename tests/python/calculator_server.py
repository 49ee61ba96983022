"""A small calculator MCP server built with the official Python SDK (`mcp` 2.x), the one the
field's tutorials write: add, subtract, multiply, divide. Dividing by zero is a tool error
(`isError: true` with the message), not a protocol error.

Used as an upstream by tests/tests/python_sdk.rs, over stdio or Streamable HTTP:

    python calculator_server.py                 # stdio
    python calculator_server.py http PORT       # Streamable HTTP on http://127.0.0.1:PORT/mcp
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calculator", version="1.0.0", instructions="Adds, subtracts, multiplies, divides.")


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
def subtract(a: float, b: float) -> float:
    """Subtract b from a."""
    return a - b


@server.tool()
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b (b must not be 0)."""
    if b == 0:
        # A ToolError is an anticipated failure: its message reaches the client in the result.
        raise ToolError("division by zero")
    return a / b


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        # Loopback only; a session-era server (the node keeps one upstream session per client session).
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
