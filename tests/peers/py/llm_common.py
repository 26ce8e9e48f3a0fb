"""Shared by the Python LLM SDK drivers (llm_openai.py, llm_anthropic.py): argument parsing,
the request every driver sends, the one JSON line each prints, and the watchdog that turns a
hang into a recorded outcome instead of a stuck test. Mirrors js/llm_common.mjs: the same
arguments, the same request, the same output line.

One run: python3 llm_X.py <base> <api> <mode> <style> [timeoutMs] [deadlineMs]
  base       the server root, e.g. http://127.0.0.1:7000 (OpenAI SDK: `<base>/v1`, Anthropic
             SDK: `<base>`, as their users configure them)
  api        chat | responses | messages
  mode       text | tool (tool: one strict function tool `get_weather`, its use required)
  style      raw (iterate the stream, add up deltas as an app does) | helper (the SDK's
             accumulating helper)
  timeoutMs  the SDK's own `timeout` option (default 3000), as an app sets it
  deadlineMs the watchdog (default 8000): past it the run is reported with what the app had
             so far and `hung: true`
Many runs: python3 llm_X.py --jobs [parallel]  reads one JSON job a line from stdin ({id, base,
  api, mode, style, timeout_ms?, deadline_ms?, h2?}; `h2: true` makes the SDK speak HTTP/2 with
  prior knowledge through its `DefaultHttpxClient(http2=True, http1=False)` passed as
  `http_client`), runs at most `parallel` (default 8) at once,
  each in its own thread with its own client, and prints one line per job (with its `id`) as
  it ends; exits 0 once every job has a line (hung calls are left behind). One process for a
  whole matrix: the SDK is imported once.
Output line: {id?, sdk, api, mode, style, text, tool, tool_calls, finish, raised, hung,
events, requests, elapsed_ms} (`requests`: those the h2 client sent, null on HTTP/1.1); `tool` is {name, arguments, parsed} (arguments as the SDK gave them: a
string, or an object when the SDK parsed them), `raised` is {type, message, cause, sdk_error,
via} or null. Exit code 0 whenever every line was printed; 2 on bad usage.
"""

import json
import os
import sys
import threading
import time

TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
PROMPT = {"text": "Say hello in a few words.", "tool": "What is the weather in Paris, in celsius?"}
MODEL = {"openai": "lab-gpt", "anthropic": "lab-claude"}

# The planted dummy keys (tests plant their own through the environment and grep for them).
KEYS = {
    "openai": os.environ.get("OPENAI_API_KEY", "sk-tearline-planted-openai-key"),
    "anthropic": os.environ.get("ANTHROPIC_API_KEY", "sk-ant-tearline-planted-anthropic-key"),
}


class Job:
    def __init__(self, raw):
        self.id = raw.get("id")
        self.base = str(raw.get("base") or "").rstrip("/")
        self.api, self.mode, self.style = raw.get("api"), raw.get("mode"), raw.get("style")
        # HTTP/2 with prior knowledge (h2c on http://), through an httpx client the SDK is given.
        self.h2 = raw.get("h2") is True
        try:
            self.timeout = float(raw.get("timeout_ms", 3000)) / 1000.0
            self.deadline = float(raw.get("deadline_ms", 8000)) / 1000.0
        except (TypeError, ValueError):
            self.timeout = self.deadline = -1.0

    def invalid(self, allowed):
        """An error message, or None when the job is well-formed."""
        if not self.base.startswith(("http://", "https://")):
            return f"base URL missing or not http(s): {self.base}"
        if self.mode not in ("text", "tool"):
            return f"unknown mode {self.mode} (text | tool)"
        if f"{self.api}/{self.style}" not in allowed:
            return f"no {self.api}/{self.style} here; this driver has {', '.join(allowed)}"
        if self.timeout <= 0 or self.deadline <= 0:
            return "timeoutMs and deadlineMs are positive numbers"
        return None


def http_client(job, app, default_client):
    """The `http_client` an app passes its SDK to speak HTTP/2, or None for the SDK's default
    (HTTP/1.1): the SDK's own `DefaultHttpxClient` (an `httpx2.Client` with the SDK's defaults;
    both SDKs at their pins are built on `httpx2` and refuse a plain `httpx.Client`) with
    `http2=True, http1=False`, h2c prior knowledge on an http:// base. One per run, as each run
    has its own SDK client. It counts the requests it starts into `app.requests` (the SDK's
    re-sends included: each attempt, whether or not its bytes all left)."""
    if not job.h2:
        return None

    def sent(_request):
        app.requests += 1

    return default_client(http2=True, http1=False, timeout=job.timeout,
                          event_hooks={"request": [sent]})


def _parsed_object(args):
    if isinstance(args, dict):
        return True
    if not isinstance(args, str):
        return False
    try:
        return isinstance(json.loads(args), dict)
    except ValueError:
        return False


def _describe(err, sdk_error_class):
    chain = []
    c = err.__cause__ or err.__context__
    while c is not None and len(chain) < 4:
        chain.append(f"{type(c).__module__}.{type(c).__name__}: {c}")
        c = c.__cause__ or c.__context__
    return {
        "type": f"{type(err).__module__}.{type(err).__name__}",
        "message": str(err)[:300],
        "cause": " <- ".join(chain)[:300] if chain else None,
        "sdk_error": isinstance(err, sdk_error_class),
        "via": "throw",
    }


class App:
    """What the SDK gave the app: text, tool calls (by the index the stream gives them), the
    finish/stop reason, the number of stream events."""

    def __init__(self):
        self.text = ""
        self.calls = {}
        self.finish = None
        self.events = 0
        self.requests = None

    def tool(self, index, name=None, args_delta=None):
        t = self.calls.setdefault(index, {"name": None, "arguments": ""})
        if name:
            t["name"] = name
        if args_delta:
            t["arguments"] = f"{t['arguments']}{args_delta}"

    def set_args(self, index, args):
        self.calls.setdefault(index, {"name": None, "arguments": ""})["arguments"] = args


def _run_one(sdk, job, sdk_error_class, body):
    """Runs one job in a daemon thread against its watchdog; returns its JSON line. A hung call
    is left behind (the process exits without waiting for it)."""
    started = time.monotonic()
    app = App()
    if job.h2:
        app.requests = 0
    raised = []

    def target():
        try:
            body(job, app)
        except BaseException as e:  # noqa: BLE001 - whatever the SDK raised is the observation
            raised.append(_describe(e, sdk_error_class))

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(job.deadline)
    hung = worker.is_alive()
    tools = list(app.calls.values())
    first = tools[0] if tools else None
    line = {
        "sdk": sdk, "api": job.api, "mode": job.mode, "style": job.style,
        "text": app.text,
        "tool": dict(first, parsed=_parsed_object(first["arguments"])) if first else None,
        "tool_calls": len(tools),
        "finish": app.finish,
        "raised": None if hung or not raised else raised[0],
        "hung": hung,
        "events": app.events,
        "requests": app.requests,
        "elapsed_ms": round((time.monotonic() - started) * 1000),
    }
    if job.id is not None:
        line = dict({"id": job.id}, **line)
    return json.dumps(line, default=str)


def main(sdk, allowed, sdk_error_class, body):
    """The driver's entry point. `allowed` lists its api/style pairs ("api/style");
    `sdk_error_class` is the SDK's documented catch-all error class; `body(job, app)` makes one
    call with a fresh client and fills `app`."""

    def fail(msg):
        print(f"{sdk}: {msg}\nusage: python3 <driver> <base> <chat|responses|messages> <text|tool> "
              "<raw|helper> [timeoutMs] [deadlineMs]\n   or: python3 <driver> --jobs [parallel] "
              "< jobs.jsonl", file=sys.stderr)
        sys.stdout.flush()
        os._exit(2)

    argv = sys.argv[1:]
    if not argv or argv[0] != "--jobs":
        if len(argv) < 4:
            fail("missing arguments")
        keys = ["base", "api", "mode", "style", "timeout_ms", "deadline_ms"]
        job = Job(dict(zip(keys, argv)))
        bad = job.invalid(allowed)
        if bad:
            fail(bad)
        print(_run_one(sdk, job, sdk_error_class, body), flush=True)
        os._exit(0)
    try:
        parallel = int(argv[1]) if len(argv) > 1 else 8
    except ValueError:
        parallel = 0
    if parallel < 1:
        fail("parallel is a number >= 1")
    jobs = []
    for text in sys.stdin:
        if not text.strip():
            continue
        try:
            job = Job(json.loads(text))
        except ValueError as e:
            fail(f"a job line is not JSON: {e}: {text[:200]}")
        bad = job.invalid(allowed)
        if bad:
            fail(f"job {job.id!r}: {bad}")
        jobs.append(job)
    lock = threading.Lock()
    pending = iter(jobs)

    def worker():
        while True:
            with lock:
                job = next(pending, None)
            if job is None:
                return
            line = _run_one(sdk, job, sdk_error_class, body)
            with lock:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(min(parallel, len(jobs)))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    sys.stdout.flush()
    os._exit(0)
