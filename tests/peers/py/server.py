"""A small real MCP server on PyPI `mcp` 2.x (MCPServer, Streamable HTTP, dual-era by default),
served by uvicorn on 127.0.0.1 port 0. Tools: `work` (idempotent: `n` progress notifications,
then a text result padded with `pad` bytes) and `append` (NOT idempotent: adds 1 to a
counter). Prints `listening <port>` once bound.

Usage: python3 server.py
"""

import socket

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("py-sdk2-server")
counter = 0


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
async def work(ctx: Context, n: int = 2, pad: int = 0) -> str:
    """n progress notifications, then a padded text result."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return f"work done: {n} " + "x" * pad


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False))
async def append(ctx: Context) -> str:
    """Adds 1 to a server-side counter."""
    global counter
    counter += 1
    await ctx.report_progress(1, 1)
    return f"appended: {counter}"


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"listening {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


anyio.run(main)
