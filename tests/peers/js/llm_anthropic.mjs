// npm `@anthropic-ai/sdk` (pinned in package.json) as an app uses it: Messages, streamed, read
// either by iterating the raw stream (`messages.create({stream: true})`, the app adding up
// deltas) or through the SDK's helper (`messages.stream().finalMessage()`). Arguments and
// output: see llm_common.mjs.
// Usage: node llm_anthropic.mjs <base> messages <text|tool> <raw|helper> [timeoutMs] [deadlineMs]
//    or: node llm_anthropic.mjs --jobs [parallel] < jobs.jsonl
import Anthropic, { AnthropicError } from "@anthropic-ai/sdk";
import { MODEL, PROMPT, TOOL, keys, main } from "./llm_common.mjs";

function params(job) {
  const p = {
    model: MODEL.anthropic,
    max_tokens: 256,
    messages: [{ role: "user", content: PROMPT[job.mode] }],
  };
  if (job.mode === "tool") {
    p.tools = [{ name: TOOL.name, description: TOOL.description, input_schema: TOOL.parameters }];
    p.tool_choice = { type: "any" };
  }
  return p;
}

async function raw(client, job, app) {
  const stream = await client.messages.create({ ...params(job), stream: true });
  for await (const ev of stream) {
    app.events++;
    switch (ev.type) {
      case "content_block_start":
        if (ev.content_block?.type === "tool_use") app.tool(ev.index, ev.content_block.name);
        break;
      case "content_block_delta":
        if (ev.delta?.type === "text_delta") app.text += ev.delta.text;
        else if (ev.delta?.type === "input_json_delta") app.tool(ev.index, null, ev.delta.partial_json);
        break;
      case "message_delta":
        if (ev.delta?.stop_reason) app.finish = ev.delta.stop_reason;
        break;
      default:
    }
  }
}

async function helper(client, job, app) {
  const stream = client.messages.stream(params(job));
  stream.on("streamEvent", () => app.events++);
  const done = await stream.finalMessage();
  (done.content ?? []).forEach((block, i) => {
    if (block.type === "text") app.text += block.text;
    else if (block.type === "tool_use") {
      app.tool(i, block.name);
      app.setArgs(i, block.input);
    }
  });
  app.finish = done.stop_reason ?? null;
}

await main("js-anthropic", ["messages/raw", "messages/helper"], (e) => e instanceof AnthropicError, (job, app) => {
  // The SDK's defaults but for the timeout an app sets (retries stay at the default).
  const client = new Anthropic({ baseURL: job.base, apiKey: keys.anthropic, timeout: job.timeout });
  return (job.style === "raw" ? raw : helper)(client, job, app);
});
