// npm `openai` (pinned in package.json) as an app uses it: Chat Completions or Responses,
// streamed, read either by iterating the raw stream (`create({stream: true})`, the app adding up
// deltas) or through the SDK's helper (`chat.completions.stream().finalChatCompletion()`,
// `responses.stream().finalResponse()`). Arguments and output: see llm_common.mjs.
// Usage: node llm_openai.mjs <base> <chat|responses> <text|tool> <raw|helper> [timeoutMs] [deadlineMs]
//    or: node llm_openai.mjs --jobs [parallel] < jobs.jsonl
import OpenAI, { OpenAIError } from "openai";
import { MODEL, PROMPT, TOOL, keys, main } from "./llm_common.mjs";

function chatParams(job) {
  const p = { model: MODEL.openai, messages: [{ role: "user", content: PROMPT[job.mode] }] };
  if (job.mode === "tool") {
    p.tools = [{ type: "function", function: { ...TOOL, strict: true } }];
    p.tool_choice = "required";
  }
  return p;
}

function responsesParams(job) {
  const p = { model: MODEL.openai, input: PROMPT[job.mode] };
  if (job.mode === "tool") {
    p.tools = [{ type: "function", ...TOOL, strict: true }];
    p.tool_choice = "required";
  }
  return p;
}

async function chatRaw(client, job, app) {
  const stream = await client.chat.completions.create({ ...chatParams(job), stream: true });
  for await (const chunk of stream) {
    app.events++;
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    if (choice.delta?.content) app.text += choice.delta.content;
    for (const tc of choice.delta?.tool_calls ?? []) {
      app.tool(tc.index, tc.function?.name, tc.function?.arguments);
    }
    if (choice.finish_reason) app.finish = choice.finish_reason;
  }
}

async function chatHelper(client, job, app) {
  const stream = client.chat.completions.stream(chatParams(job));
  stream.on("chunk", () => app.events++);
  const done = await stream.finalChatCompletion();
  const choice = done.choices[0];
  app.text = choice?.message?.content ?? "";
  (choice?.message?.tool_calls ?? []).forEach((tc, i) => {
    app.tool(i, tc.function?.name);
    app.setArgs(i, tc.function?.arguments ?? "");
  });
  app.finish = choice?.finish_reason ?? null;
}

async function responsesRaw(client, job, app) {
  const stream = await client.responses.create({ ...responsesParams(job), stream: true });
  for await (const ev of stream) {
    app.events++;
    switch (ev.type) {
      case "response.output_text.delta":
        app.text += ev.delta;
        break;
      case "response.output_item.added":
        if (ev.item?.type === "function_call") app.tool(ev.output_index, ev.item.name, ev.item.arguments);
        break;
      case "response.function_call_arguments.delta":
        app.tool(ev.output_index, null, ev.delta);
        break;
      case "response.function_call_arguments.done":
        app.setArgs(ev.output_index, ev.arguments);
        break;
      case "response.completed":
      case "response.incomplete":
      case "response.failed":
        app.finish = ev.response?.status ?? ev.type;
        break;
      default:
    }
  }
}

async function responsesHelper(client, job, app) {
  const stream = client.responses.stream(responsesParams(job));
  stream.on("event", () => app.events++);
  const done = await stream.finalResponse();
  (done.output ?? []).forEach((item, i) => {
    if (item.type === "message") {
      for (const c of item.content ?? []) if (c.type === "output_text") app.text += c.text;
    } else if (item.type === "function_call") {
      app.tool(i, item.name);
      app.setArgs(i, item.arguments ?? "");
    }
  });
  app.finish = done.status ?? null;
}

const BODY = {
  "chat/raw": chatRaw,
  "chat/helper": chatHelper,
  "responses/raw": responsesRaw,
  "responses/helper": responsesHelper,
};
await main("js-openai", Object.keys(BODY), (e) => e instanceof OpenAIError, (job, app) => {
  // The SDK's defaults but for the timeout an app sets (retries stay at the default).
  const client = new OpenAI({ baseURL: `${job.base}/v1`, apiKey: keys.openai, timeout: job.timeout });
  return BODY[`${job.api}/${job.style}`](client, job, app);
});
