"""An app on the published Python MCP client (PyPI `mcp` 2.x) in its 2026-07-28 mode, running
one workload against a server and writing its own ground truth: one JSON line per request it
POSTed (which logical call, which attempt, original or re-send of which call, the JSON-RPC id
and the Idempotency-Key it carried) and, per attempt, whether it was answered. The truth comes
from the app and its HTTP client, never from the proxy's audit.

Usage: python3 app_driver.py URL WORKLOAD CALLS TOOL ARGS_JSON TRUTH_FILE [TIMEOUT_MS [h2]]

With `h2` the app's httpx client speaks HTTP/2 only (`http2=True, http1=False`: h2c with prior
knowledge on an http:// URL), the SDK's requests multiplexed on its connection.

Workloads (as tests/peers/js/app_driver.mjs):
  repeat        CALLS calls of TOOL with the same ARGS, one after another; a failed call is
                not sent again
  distinct      the same, each call's arguments made distinct (`item: <k>` added)
  retry         repeat, with an app-level retry layer: a failed call is sent once more (a new
                JSON-RPC id, nothing on the wire says it is a re-send)
  retry-marked  retry, the layer marking each logical call with an `Idempotency-Key` header
                (fresh per call, repeated on its re-send)
  retry-changed distinct, with the retry layer re-sending a failed call once with other
                arguments (`attempt: <n>` added): no call repeats another's arguments
  give-up       repeat, stopping at the first failed call (the app gives up)
Truth lines: {"post", "method", "rpc_id" (JSON text), "call", "attempt", "resend_of", "key",
"args" (a tools/call's arguments, else null)} for every POST; {"call", "attempt", "resend_of", "answered", "error"} per tool-call attempt;
{"done": true} last. Exit 0 when the workload ran (failed calls included), 1 on a harness error.
A transport error that ends the SDK client (it does so for a JSON body cut short) fails the call
in flight; the app then opens a new client (its JSON-RPC ids start again) and goes on.
"""

import json
import sys
import uuid

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

WORKLOADS = ("repeat", "distinct", "retry", "retry-marked", "retry-changed", "give-up")


async def main() -> None:
    url, workload, calls, tool, args_json, truth_path = sys.argv[1:7]
    timeout = float(sys.argv[7]) / 1000 if len(sys.argv) > 7 else 1.5
    h2 = len(sys.argv) > 8 and sys.argv[8] == "h2"
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {workload}")
    base_args = json.loads(args_json)
    truth = open(truth_path, "w", encoding="utf-8")

    def log(line: dict) -> None:
        truth.write(json.dumps(line) + "\n")
        truth.flush()

    state = {"current": None, "posts": 0}

    async def on_request(request: httpx2.Request) -> None:
        if request.method != "POST":
            return
        try:
            msg = json.loads(request.content)
        except ValueError:
            return
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            return
        cur = state["current"] if msg["method"] == "tools/call" else None
        if cur is not None and cur["key"]:
            request.headers["Idempotency-Key"] = cur["key"]
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        log({"post": state["posts"], "method": msg["method"], "rpc_id": json.dumps(msg["id"]),
             "call": cur and cur["call"], "attempt": cur and cur["attempt"],
             "resend_of": cur and cur["resend_of"], "key": cur and cur["key"],
             "args": params.get("arguments") if msg["method"] == "tools/call" else None})
        state["posts"] += 1

    retrying = workload in ("retry", "retry-marked", "retry-changed")
    distinct = workload in ("distinct", "retry-changed")
    # The app's position: logical call k, attempt a (a failed attempt moves it on).
    pos = {"k": 0, "a": 0, "key": None, "in_flight": False}
    calls = int(calls)

    def settle(answered: bool, error: str | None) -> None:
        k, a = pos["k"], pos["a"]
        log({"call": k, "attempt": a, "resend_of": k if a > 0 else None,
             "answered": answered, "error": error})
        pos["in_flight"] = False
        state["current"] = None
        if answered or a + 1 >= (2 if retrying else 1):
            pos["k"], pos["a"], pos["key"] = (calls if not answered and workload == "give-up" else k + 1), 0, None
        else:
            pos["a"] = a + 1

    with anyio.fail_after(60):
        # A transport error the SDK does not map to the call (e.g. a JSON body cut short) ends
        # the whole client; the app then opens a new one and goes on, as a long-running app does.
        while pos["k"] < calls:
            try:
                http = httpx2.AsyncClient(event_hooks={"request": [on_request]},
                                          timeout=httpx2.Timeout(30, read=300),
                                          http1=not h2, http2=h2)
                async with http, Client(streamable_http_client(url, http_client=http),
                                        mode="2026-07-28") as client:
                    await client.list_tools()
                    while pos["k"] < calls:
                        k, a = pos["k"], pos["a"]
                        args = dict(base_args, item=k) if distinct else base_args
                        if workload == "retry-changed":
                            args = dict(args, attempt=a)
                        if a == 0:
                            pos["key"] = str(uuid.uuid4()) if workload == "retry-marked" else None
                        state["current"] = {"call": k, "attempt": a,
                                            "resend_of": k if a > 0 else None, "key": pos["key"]}
                        pos["in_flight"] = True
                        try:
                            result = await client.call_tool(tool, args, read_timeout_seconds=timeout,
                                                            progress_callback=_ignore)
                        except Exception as e:  # noqa: BLE001 - every failure is the app's failed call
                            settle(False, f"{type(e).__name__}: {e}"[:200])
                            continue
                        if result.is_error:
                            text = "".join(getattr(c, "text", "") for c in result.content)
                            settle(False, "tool error: " + text[:200])
                        else:
                            settle(True, None)
            except Exception as e:  # noqa: BLE001 - the client died; its call in flight failed
                if pos["in_flight"]:
                    settle(False, f"client died: {type(e).__name__}: {e}"[:200])
                else:
                    raise
    log({"done": True})


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    pass


anyio.run(main)
