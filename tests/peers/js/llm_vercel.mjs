// npm `ai` (Vercel AI SDK, pinned in package.json) with `@ai-sdk/openai` (Chat Completions or
// Responses model) or `@ai-sdk/anthropic` (Messages model), as an app uses it: `streamText`
// with the app reading `fullStream` (text deltas, tool calls, error parts, the finish part).
// `streamText` does not throw for stream failures: it hands them over as `error` parts (and its
// own timeout as an `abort` part), which this driver records as `raised` with `via:
// "error-part"` / `"abort-part"`. Arguments and output: see llm_common.mjs.
// Usage: node llm_vercel.mjs <base> <chat|responses|messages> <text|tool> stream-text [timeoutMs] [deadlineMs]
//    or: node llm_vercel.mjs --jobs [parallel] < jobs.jsonl
import { AISDKError, jsonSchema, streamText, tool } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { MODEL, PROMPT, TOOL, keys, main } from "./llm_common.mjs";

// The SDK's warnings (e.g. an unknown model name's output cap) go to stderr; they are noise here.
globalThis.AI_SDK_LOG_WARNINGS = false;

/** What an `abort` stream part hands the app: a reason, no error object. */
class AbortPart extends Error {}

function model(job) {
  if (job.api === "messages") {
    return createAnthropic({ baseURL: `${job.base}/v1`, apiKey: keys.anthropic })(MODEL.anthropic);
  }
  const openai = createOpenAI({ baseURL: `${job.base}/v1`, apiKey: keys.openai });
  return job.api === "chat" ? openai.chat(MODEL.openai) : openai.responses(MODEL.openai);
}

async function body(job, app) {
  // The SDK's defaults (retries included) but for the timeout an app sets.
  const call = { model: model(job), prompt: PROMPT[job.mode], maxOutputTokens: 256, timeout: job.timeout };
  if (job.mode === "tool") {
    // No `execute`: the call is handed to the app, as an app that runs tools itself does.
    call.tools = {
      [TOOL.name]: tool({ description: TOOL.description, inputSchema: jsonSchema(TOOL.parameters) }),
    };
    call.toolChoice = "required";
  }
  // Errors are handed over as parts; without this the SDK also prints each one to stderr.
  call.onError = () => {};
  const result = streamText(call);
  for await (const part of result.fullStream) {
    switch (part.type) {
      case "text-delta":
        app.events++;
        app.text += part.text;
        break;
      case "tool-input-delta":
        app.events++;
        break;
      case "tool-call":
        app.events++;
        app.tool(part.toolCallId, part.toolName);
        app.setArgs(part.toolCallId, part.input, part.invalid ? { invalid: true } : {});
        break;
      case "error":
        app.report(part.error, "error-part");
        break;
      case "abort":
        // The SDK's own timeout (or an abort signal) ended the call.
        app.report(new AbortPart(String(part.reason ?? "aborted")), "abort-part");
        break;
      case "finish":
        app.finish = part.finishReason ?? null;
        break;
      default:
    }
  }
}

await main("js-vercel", ["chat/stream-text", "responses/stream-text", "messages/stream-text"], (e) => AISDKError.isInstance(e), body);
