"""The Python `mcp` 2.x client resuming a cut tool call (issue 34: after a broken resume leg it
resumes with that leg's own starting cursor again). Prints one JSON line: the data of every
`notifications/message` it received, in order, and the result's text.

Usage: python3 stale_resume.py <url>
"""

import json
import sys

import anyio
from mcp import Client


async def main() -> None:
    got = []

    async def on_log(params) -> None:
        got.append(params.data)

    with anyio.fail_after(30):
        async with Client(sys.argv[1], mode="legacy", logging_callback=on_log) as client:
            result = await client.call_tool("stream", {})
            text = "".join(getattr(c, "text", "") for c in result.content)
    print(json.dumps({"messages": got, "text": text}))


anyio.run(main)
