"""The Python peer client of tearline's HTTP/2 tests: httpx with `http2=True` (PyPI httpx,
httpcore and h2, pinned in requirements.lock). Every named SSE stream is followed at once on one
AsyncClient, which multiplexes them on one HTTP/2 connection: ALPN h2 for https:// (trusting
--ca), prior knowledge (h2c) for http://. A stream that ends before event N is resumed with
Last-Event-ID, up to --resume times.

Logs JSON lines on stdout: response (status, HTTP version, h2 stream id), message (id, data),
reset (h2 stream id and RST_STREAM code, from h2's own StreamReset event), goaway (code, last
stream id, from h2's ConnectionTerminated), resume, end, error, done.

Usage: python3 h2_sse_client.py URL --streams a,b --n N [--query Q] [--ca CA] [--resume K]
       [--retry-delay MS] [--timeout MS]
--retry-delay waits that long before each resume (default 0: at once), as an application that
backs off before it retries.
"""

import argparse
import json
import ssl
import sys
import time

import anyio
import h2.events
import h2.exceptions
import httpx

START = time.monotonic()


def log(event: str, **fields) -> None:
    line = {"peer": "py-client", "event": event, "t_ms": round((time.monotonic() - START) * 1000)}
    line.update(fields)
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def h2_event(exc: BaseException):
    """The h2 event (StreamReset, ConnectionTerminated) behind an httpx error, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for a in exc.args:
            if isinstance(a, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                return a
        exc = exc.__cause__ or exc.__context__
    return None


def log_error(name: str, exc: BaseException, stream_id) -> None:
    ev = h2_event(exc)
    if isinstance(ev, h2.events.StreamReset):
        log("reset", stream=name, h2_stream=ev.stream_id, code=ev.error_code.name,
            remote=ev.remote_reset)
    elif isinstance(ev, h2.events.ConnectionTerminated):
        log("goaway", stream=name, h2_stream=stream_id, code=ev.error_code.name,
            last_stream=ev.last_stream_id)
    else:
        log("error", stream=name, h2_stream=stream_id, message=f"{type(exc).__name__}: {exc}")


class Parser:
    """WHATWG SSE parsing: an event's id becomes the last event id only when it dispatches."""

    def __init__(self, last: str):
        self.last = last
        self.pending = last
        self.data = None
        self.buf = ""

    def feed(self, text: str):
        self.buf += text
        out = []
        while True:
            cut = min((i for i in (self.buf.find("\r"), self.buf.find("\n")) if i >= 0), default=-1)
            if cut < 0 or (self.buf[cut] == "\r" and cut + 1 == len(self.buf)):
                return out
            line = self.buf[:cut]
            skip = 2 if self.buf[cut:cut + 2] == "\r\n" else 1
            self.buf = self.buf[cut + skip:]
            if line == "":
                if self.data is not None:
                    self.last = self.pending
                    out.append((self.last, "\n".join(self.data)))
                self.data = None
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self.data = (self.data or []) + [value]
            elif name == "id" and "\0" not in value:
                self.pending = value


async def follow(client: httpx.AsyncClient, args, name: str, results: dict, started) -> None:
    last = ""
    for attempt in range(args.resume + 1):
        url = f"{args.url}/sse?stream={name}&n={args.n}" + (f"&{args.query}" if args.query else "")
        headers = {"accept": "text/event-stream"}
        if attempt > 0 and args.retry_delay > 0:
            await anyio.sleep(args.retry_delay / 1000)
        if last:
            headers["last-event-id"] = last
            log("resume", stream=name, last_event_id=last)
        stream_id = None
        try:
            async with client.stream("GET", url, headers=headers) as resp:
                stream_id = resp.extensions.get("stream_id")
                log("response", stream=name, status=resp.status_code, http_version=resp.http_version,
                    h2_stream=stream_id)
                started.set()
                if resp.status_code == 204:
                    break
                parser = Parser(last)
                async for text in resp.aiter_text():
                    for ev_id, data in parser.feed(text):
                        last = ev_id
                        log("message", stream=name, h2_stream=stream_id, id=ev_id, data=data)
                log("end", stream=name, h2_stream=stream_id, last_id=last)
        except (httpx.HTTPError, h2.exceptions.ProtocolError) as exc:
            # httpcore lets h2's own ProtocolError through unwrapped when frames keep coming
            # after a GOAWAY closed h2's connection state: the application sees it as is.
            log_error(name, exc, stream_id)
        started.set()
        if last == str(args.n):
            break
    results[name] = last == str(args.n)


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--streams", default="a")
    p.add_argument("--n", type=int, default=5)
    p.add_argument("--query", default="")
    p.add_argument("--ca")
    p.add_argument("--resume", type=int, default=0)
    p.add_argument("--timeout", type=float, default=20000.0, help="milliseconds")
    p.add_argument("--retry-delay", type=float, default=0.0, help="milliseconds")
    args = p.parse_args()
    verify = ssl.create_default_context(cafile=args.ca) if args.ca else True
    prior_knowledge = args.url.startswith("http://")
    results: dict = {}
    try:
        with anyio.fail_after(args.timeout / 1000):
            async with httpx.AsyncClient(http1=not prior_knowledge, http2=True, verify=verify,
                                         timeout=args.timeout / 1000, trust_env=False) as client:
                # Each stream starts once the one before it has its response: the first request
                # establishes the HTTP/2 connection, and httpcore then multiplexes the others on
                # it (requests queued before it is up each wait for the one ahead).
                async with anyio.create_task_group() as tg:
                    for name in args.streams.split(","):
                        started = anyio.Event()
                        tg.start_soon(follow, client, args, name, results, started)
                        await started.wait()
    except TimeoutError:
        log("done", complete=False, reason="timeout")
        return 1
    complete = all(results.values()) and len(results) == len(args.streams.split(","))
    log("done", complete=complete)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
