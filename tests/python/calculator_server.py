"""A small calculator MCP server built with the official Python SDK (`mcp` 2.x), served on stdio.

Used as a stdio upstream by tests/tests/python_sdk.rs:

    python calculator_server.py
"""

from mcp.server.mcpserver import MCPServer

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
        raise ValueError("division by zero")
    return a / b


if __name__ == "__main__":
    server.run()
