"""A real MCP Python client (PyPI `mcp` 2.x) against a server: tools/list, then a streamed
tools/call with progress. Prints one JSON line: {era, tools, progress, text}.

Usage: python3 lab_client.py <url> <legacy|auto|2026-07-28> [tool] [argsJSON]
"""

import json
import sys

import anyio
from mcp import Client


async def main() -> None:
    url, mode = sys.argv[1], sys.argv[2]
    tool = sys.argv[3] if len(sys.argv) > 3 else "progress"
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {"n": 3}
    progress = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(20):
        async with Client(url, mode=mode) as client:
            listed = await client.list_tools()
            result = await client.call_tool(tool, args, progress_callback=on_progress)
            text = "".join(getattr(c, "text", "") for c in result.content)
            print(json.dumps({"era": client.protocol_version, "tools": [t.name for t in listed.tools],
                              "progress": len(progress), "text": text[:200]}))


anyio.run(main)
