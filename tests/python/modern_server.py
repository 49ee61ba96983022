"""A greeter MCP server built with the official Python SDK (`mcp` 2.x), served over Streamable HTTP.

Speaks 2026-07-28 statelessly (and the session era to older clients). `greet` needs the user's
name: it asks for it with an elicitation, which under 2026-07-28 travels as an MRTR input request.
Used as a 2026-07-28 upstream by tests/tests/bridge_python_upstream.rs:

    python modern_server.py <port>
"""

import sys
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Elicit, MCPServer, Resolve

server = MCPServer("greeter", version="1.0.0", instructions="Greets people by name.")


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greet the user, asking for their name first."""
    return f"Hello, {who.name}!"


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
