"""What a client discards at a TCP reset: the measurement behind `--rst-unread` (issue 34).

A tiny server writes numbered SSE events (`gap` ms apart), then resets the connection
(SO_LINGER 0) and waits for the client's reconnect. The reconnect's `Last-Event-ID` says what
the client kept; the server knows when it wrote every event, so it prints, per trial, how many
events the client discarded and how long before the reset the oldest discarded one was written
(`discarded_age_ms`; 0 when nothing was discarded) and the newest kept one (`kept_age_ms`).

Two clients: headless Chromium's EventSource (`/events`, a page served by the same server) and
the Python `mcp` client (`/mcp`, MCP 2025-11-25: a `tools/call` answered with an SSE stream of
`notifications/message` events, resumed by GET). Usage:
  python3 bench/rst_unread.py chromium <trials> <events> <gap_ms>
  PYTHONPATH=tests/peers/python python3 bench/rst_unread.py mcp <trials> <events> <gap_ms>
"""

import json
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

MODE, TRIALS, EVENTS, GAP = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
PAD = "x" * 64
written = {}  # trial -> (times of events 1..N, reset time)
done = threading.Event()
results = []


def head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, {}, b""
        data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    n = int(hdrs.get("content-length", "0"))
    while len(rest) < n:
        rest += conn.recv(65536)
    return lines[0], hdrs, rest


def send(conn, status, ctype, body=b"", extra=""):
    conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                 f"Connection: close\r\n{extra}\r\n".encode() + body)
    conn.close()


def stream_then_reset(conn, trial, event, extra=""):
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                 f"Connection: close\r\n{extra}\r\n".encode())
    conn.sendall(b"retry: 50\n\n")
    times = []
    for n in range(1, EVENTS + 1):
        conn.sendall(event(n).encode())
        times.append(time.monotonic())
        if GAP:
            time.sleep(GAP / 1000)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    written[trial] = (times, time.monotonic())
    conn.close()


def record(trial, cursor):
    times, reset = written.pop(trial)
    kept = int(cursor.lstrip("e")) if cursor else 0
    age = lambda i: round((reset - times[i - 1]) * 1000, 1)
    results.append({"client": MODE, "trial": trial, "events": EVENTS, "gap_ms": GAP,
                    "cursor": cursor, "discarded": EVENTS - kept,
                    "discarded_age_ms": age(kept + 1) if kept < EVENTS else 0,
                    "kept_age_ms": age(kept) if kept else None})
    print(json.dumps(results[-1]), flush=True)
    if len(results) >= TRIALS:
        done.set()


PAGE = """<!doctype html><script>
let t = 0;
function next() { if (t >= %d) return; const k = t++; const es = new EventSource('/events?t=' + k);
  es.onerror = () => { if (es.readyState === 2) next(); }; }
next();
</script>""" % TRIALS


def handle(conn):
    line, hdrs, body = head(conn)
    if line is None:
        return conn.close()
    method, path = line.split(" ")[:2]
    cursor = hdrs.get("last-event-id")
    if path.startswith("/events"):
        trial = path.split("t=")[-1]
        if trial in written:
            record(trial, cursor)
            return send(conn, "204 No Content", "text/plain")
        return stream_then_reset(conn, trial, lambda n: f"id: {n}\ndata: {n} {PAD}\n\n")
    if path == "/page":
        return send(conn, "200 OK", "text/html", PAGE.encode())
    if path != "/mcp":
        return send(conn, "404 Not Found", "text/plain")
    sid = "Mcp-Session-Id: s1\r\n"
    if method == "GET":
        trial = hdrs.get("mcp-session-id", "s1") + "/call"
        if trial in written and cursor:
            rid = pending.pop(trial)
            record(trial, cursor)
            res = {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "ok"}]}}
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n{sid}"
                         f"\r\nid: r\ndata: {json.dumps(res)}\n\n".encode())
            return conn.close()
        return send(conn, "405 Method Not Allowed", "text/plain", extra=sid)
    if method == "DELETE":
        return send(conn, "200 OK", "text/plain", extra=sid)
    msg = json.loads(body)
    if "id" not in msg:
        return send(conn, "202 Accepted", "text/plain", extra=sid)
    if msg["method"] == "initialize":
        res = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
               "serverInfo": {"name": "rst-unread", "version": "1"}}
    elif msg["method"] == "tools/list":
        res = {"tools": [{"name": "stream", "inputSchema": {"type": "object"}}]}
    else:
        pending["s1/call"] = msg["id"]
        note = lambda n: json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                     "params": {"level": "info", "data": f"{n} {PAD}"}})
        return stream_then_reset(conn, "s1/call", lambda n: f"id: e{n}\ndata: {note(n)}\n\n", sid)
    body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}).encode()
    send(conn, "200 OK", "application/json", body, sid)


pending = {}


def serve(lst):
    while True:
        conn, _ = lst.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


lst = socket.socket()
lst.bind(("127.0.0.1", 0))
lst.listen(64)
port = lst.getsockname()[1]
threading.Thread(target=serve, args=(lst,), daemon=True).start()

if MODE == "chromium":
    prof = tempfile.mkdtemp()
    browser = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                f"--user-data-dir={prof}", f"http://127.0.0.1:{port}/page"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done.wait(timeout=30 + TRIALS * 2)
    browser.terminate()
    browser.wait()
    shutil.rmtree(prof, ignore_errors=True)
else:
    import anyio
    from mcp import Client

    async def run():
        for _ in range(TRIALS):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                with anyio.fail_after(20):
                    await client.call_tool("stream", {})

    anyio.run(run)
kept = [r["discarded"] for r in results]
print(json.dumps({"summary": MODE, "trials": len(results), "gap_ms": GAP,
                  "max_discarded": max(kept, default=None),
                  "max_discarded_age_ms": max((r["discarded_age_ms"] for r in results), default=None),
                  "min_kept_age_ms": min((r["kept_age_ms"] for r in results if r["kept_age_ms"] is not None),
                                         default=None)}))
