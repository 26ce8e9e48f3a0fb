"""PyPI `openai` (pinned in requirements.lock) as an app uses it: Chat Completions or
Responses, streamed, read either by iterating the raw stream (`create(stream=True)`, the app
adding up deltas) or through the SDK's helper (`chat.completions.stream()` /
`responses.stream()` iterated, then `get_final_completion()` / `get_final_response()`).
Arguments and output: see llm_common.py.

Usage: python3 llm_openai.py <base> <chat|responses> <text|tool> <raw|helper> [timeoutMs] [deadlineMs]
   or: python3 llm_openai.py --jobs [parallel] < jobs.jsonl
"""

import openai

from llm_common import KEYS, MODEL, PROMPT, TOOL, http_client, main


def chat_params(job):
    p = {"model": MODEL["openai"], "messages": [{"role": "user", "content": PROMPT[job.mode]}]}
    if job.mode == "tool":
        p["tools"] = [{"type": "function", "function": dict(TOOL, strict=True)}]
        p["tool_choice"] = "required"
    return p


def responses_params(job):
    p = {"model": MODEL["openai"], "input": PROMPT[job.mode]}
    if job.mode == "tool":
        p["tools"] = [dict(TOOL, type="function", strict=True)]
        p["tool_choice"] = "required"
    return p


def chat_raw(client, job, app):
    for chunk in client.chat.completions.create(**chat_params(job), stream=True):
        app.events += 1
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        if choice.delta and choice.delta.content:
            app.text += choice.delta.content
        for tc in (choice.delta.tool_calls or []) if choice.delta else []:
            fn = tc.function
            app.tool(tc.index, fn.name if fn else None, fn.arguments if fn else None)
        if choice.finish_reason:
            app.finish = choice.finish_reason


def chat_helper(client, job, app):
    with client.chat.completions.stream(**chat_params(job)) as stream:
        for _ in stream:
            app.events += 1
        done = stream.get_final_completion()
    choice = done.choices[0] if done.choices else None
    if choice is None:
        return
    app.text = choice.message.content or ""
    for i, tc in enumerate(choice.message.tool_calls or []):
        app.tool(i, tc.function.name)
        app.set_args(i, tc.function.arguments)
    app.finish = choice.finish_reason


def responses_raw(client, job, app):
    for ev in client.responses.create(**responses_params(job), stream=True):
        app.events += 1
        t = ev.type
        if t == "response.output_text.delta":
            app.text += ev.delta
        elif t == "response.output_item.added" and ev.item.type == "function_call":
            app.tool(ev.output_index, ev.item.name, ev.item.arguments)
        elif t == "response.function_call_arguments.delta":
            app.tool(ev.output_index, None, ev.delta)
        elif t == "response.function_call_arguments.done":
            app.set_args(ev.output_index, ev.arguments)
        elif t in ("response.completed", "response.incomplete", "response.failed"):
            app.finish = ev.response.status


def responses_helper(client, job, app):
    with client.responses.stream(**responses_params(job)) as stream:
        for _ in stream:
            app.events += 1
        done = stream.get_final_response()
    for i, item in enumerate(done.output or []):
        if item.type == "message":
            app.text += "".join(c.text for c in item.content if c.type == "output_text")
        elif item.type == "function_call":
            app.tool(i, item.name)
            app.set_args(i, item.arguments)
    app.finish = done.status


BODY = {"chat/raw": chat_raw, "chat/helper": chat_helper,
        "responses/raw": responses_raw, "responses/helper": responses_helper}


def body(job, app):
    # The SDK's defaults but for the timeout an app sets (retries stay at the default).
    client = openai.OpenAI(base_url=f"{job.base}/v1", api_key=KEYS["openai"], timeout=job.timeout,
                           http_client=http_client(job, app, openai.DefaultHttpxClient))
    BODY[f"{job.api}/{job.style}"](client, job, app)


main("py-openai", list(BODY), openai.OpenAIError, body)
