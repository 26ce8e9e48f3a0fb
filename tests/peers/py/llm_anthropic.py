"""PyPI `anthropic` (pinned in requirements.lock) as an app uses it: Messages, streamed, read
either by iterating the raw stream (`messages.create(stream=True)`, the app adding up deltas)
or through the SDK's helper (`messages.stream()` iterated, then `get_final_message()`).
Arguments and output: see llm_common.py.

Usage: python3 llm_anthropic.py <base> messages <text|tool> <raw|helper> [timeoutMs] [deadlineMs]
   or: python3 llm_anthropic.py --jobs [parallel] < jobs.jsonl
"""

import anthropic

from llm_common import KEYS, MODEL, PROMPT, TOOL, http_client, main


def params(job):
    p = {"model": MODEL["anthropic"], "max_tokens": 256,
         "messages": [{"role": "user", "content": PROMPT[job.mode]}]}
    if job.mode == "tool":
        p["tools"] = [{"name": TOOL["name"], "description": TOOL["description"],
                       "input_schema": TOOL["parameters"]}]
        p["tool_choice"] = {"type": "any"}
    return p


def raw(client, job, app):
    for ev in client.messages.create(**params(job), stream=True):
        app.events += 1
        if ev.type == "content_block_start" and ev.content_block.type == "tool_use":
            app.tool(ev.index, ev.content_block.name)
        elif ev.type == "content_block_delta":
            if ev.delta.type == "text_delta":
                app.text += ev.delta.text
            elif ev.delta.type == "input_json_delta":
                app.tool(ev.index, None, ev.delta.partial_json)
        elif ev.type == "message_delta" and ev.delta.stop_reason:
            app.finish = ev.delta.stop_reason


def helper(client, job, app):
    with client.messages.stream(**params(job)) as stream:
        for _ in stream:
            app.events += 1
        done = stream.get_final_message()
    for i, block in enumerate(done.content):
        if block.type == "text":
            app.text += block.text
        elif block.type == "tool_use":
            app.tool(i, block.name)
            app.set_args(i, block.input)
    app.finish = done.stop_reason


def body(job, app):
    # The SDK's defaults but for the timeout an app sets (retries stay at the default).
    client = anthropic.Anthropic(base_url=job.base, api_key=KEYS["anthropic"], timeout=job.timeout,
                                 http_client=http_client(job, app, anthropic.DefaultHttpxClient))
    (raw if job.style == "raw" else helper)(client, job, app)


main("py-anthropic", ["messages/raw", "messages/helper"], anthropic.AnthropicError, body)
