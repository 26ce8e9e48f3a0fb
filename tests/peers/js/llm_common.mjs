// Shared by the LLM SDK drivers (llm_openai.mjs, llm_anthropic.mjs, llm_vercel.mjs): argument
// parsing, the request every driver sends, the JSON line each run prints, and the watchdog that
// turns a hang into a recorded outcome instead of a stuck test.
//
// One run:  node llm_X.mjs <base> <api> <mode> <style> [timeoutMs] [deadlineMs]
//   base      the server root, e.g. http://127.0.0.1:7000 (each SDK gets the base URL its
//             users give it: OpenAI SDKs `<base>/v1`, Anthropic SDKs `<base>`)
//   api       chat | responses | messages
//   mode      text | tool (tool: one strict function tool `get_weather`, its use required)
//   style     raw (iterate the stream, add up deltas as an app does) | helper (the SDK's
//             accumulating helper) | stream-text (Vercel `streamText`)
//   timeoutMs the SDK's own `timeout` option (default 3000), as an app sets it
//   deadlineMs the watchdog (default 8000): past it the run is reported with what the app had
//             so far and `hung: true`
// Many runs: node llm_X.mjs --jobs [parallel]  reads one JSON job a line from stdin
//   ({id, base, api, mode, style, timeout_ms?, deadline_ms?}), runs at most `parallel`
//   (default 8) at once, each with its own client, and prints one line per job (with its `id`)
//   as it ends; exits 0 once every job has a line (hung ones are left behind). One process
//   for a whole matrix: the SDK is loaded once.
// Output line: {id?, sdk, api, mode, style, text, tool, tool_calls, finish, raised, hung,
// events, elapsed_ms}; `tool` is {name, arguments, parsed} (arguments as the SDK gave them:
// a string, or an object when the SDK parsed them; Vercel adds `invalid`), `raised` is {type,
// message, cause, sdk_error, via} or null (`via`: throw | error-part | abort-part).
// Exit code 0 whenever every line was printed; 2 on bad usage.
import { createInterface } from "node:readline";

export const TOOL = {
  name: "get_weather",
  description: "Current weather for a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
    required: ["city", "unit"],
    additionalProperties: false,
  },
};
export const PROMPT = {
  text: "Say hello in a few words.",
  tool: "What is the weather in Paris, in celsius?",
};
export const MODEL = { openai: "lab-gpt", anthropic: "lab-claude" };

/** The planted dummy keys (tests plant their own through the environment and grep for them). */
export const keys = {
  openai: process.env.OPENAI_API_KEY ?? "sk-tearline-planted-openai-key",
  anthropic: process.env.ANTHROPIC_API_KEY ?? "sk-ant-tearline-planted-anthropic-key",
};

const MODES = ["text", "tool"];

/** Checks one job; returns an error message or null. */
function invalid(job, allowed) {
  if (typeof job.base !== "string" || !/^https?:\/\//.test(job.base)) return `base URL missing or not http(s): ${job.base}`;
  if (!MODES.includes(job.mode)) return `unknown mode ${job.mode} (text | tool)`;
  if (!allowed.includes(`${job.api}/${job.style}`)) return `no ${job.api}/${job.style} here; this driver has ${allowed.join(", ")}`;
  if (!(job.timeout > 0) || !(job.deadline > 0)) return "timeoutMs and deadlineMs are positive numbers";
  return null;
}

function job(raw) {
  return {
    id: raw.id,
    base: String(raw.base ?? "").replace(/\/+$/, ""),
    api: raw.api,
    mode: raw.mode,
    style: raw.style,
    timeout: Number(raw.timeout_ms ?? 3000),
    deadline: Number(raw.deadline_ms ?? 8000),
  };
}

/** Whether `args` (a string or an already parsed value) is a JSON object. */
function parsedObject(args) {
  if (args !== null && typeof args === "object") return !Array.isArray(args);
  if (typeof args !== "string") return false;
  try {
    const v = JSON.parse(args);
    return v !== null && typeof v === "object" && !Array.isArray(v);
  } catch {
    return false;
  }
}

function describe(err, isSdkError, via) {
  const chain = [];
  for (let c = err?.cause, i = 0; c && i < 4; c = c.cause, i++) {
    chain.push(`${c?.constructor?.name ?? typeof c}: ${c?.message ?? String(c)}`);
  }
  return {
    type: err?.constructor?.name ?? typeof err,
    message: String(err?.message ?? err).slice(0, 300),
    cause: chain.length ? chain.join(" <- ").slice(0, 300) : null,
    sdk_error: Boolean(isSdkError(err)),
    via,
  };
}

/**
 * What the SDK gave the app: `app.text += …`, `app.tool(index, name, argsDelta)` (a streamed
 * tool call, by the index the stream gives it), `app.setArgs(index, args, extra)` (its
 * arguments as a whole), `app.finish = …`, `app.events++`, `app.report(err, via)` (an error
 * handed over as a value, not thrown; the first is kept).
 */
function newApp() {
  return {
    text: "",
    calls: new Map(),
    finish: null,
    events: 0,
    reported: null,
    tool(index, name, argsDelta) {
      const t = this.calls.get(index) ?? { name: null, arguments: "" };
      if (name) t.name = name;
      if (argsDelta) t.arguments = `${t.arguments}${argsDelta}`;
      this.calls.set(index, t);
    },
    setArgs(index, args, extra = {}) {
      const t = this.calls.get(index) ?? { name: null, arguments: "" };
      t.arguments = args;
      Object.assign(t, extra);
      this.calls.set(index, t);
    },
    report(e, via) {
      this.reported ??= { e, via };
    },
  };
}

/** Runs one job to its JSON line: `body(job, app)` against the watchdog. */
async function runOne(sdk, j, isSdkError, body) {
  const started = performance.now();
  const app = newApp();
  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve("hung"), j.deadline);
  });
  let raised = null;
  const outcome = await Promise.race([
    body(j, app).then(
      () => "done",
      (e) => {
        raised = describe(e, isSdkError, "throw");
        return "done";
      },
    ),
    deadline,
  ]);
  clearTimeout(timer);
  const hung = outcome === "hung";
  if (hung) raised = null;
  else if (raised === null && app.reported !== null) raised = describe(app.reported.e, isSdkError, app.reported.via);
  const tools = [...app.calls.values()];
  const first = tools[0];
  const line = {
    ...(j.id === undefined ? {} : { id: j.id }),
    sdk,
    api: j.api,
    mode: j.mode,
    style: j.style,
    text: app.text,
    tool: first ? { ...first, parsed: parsedObject(first.arguments) } : null,
    tool_calls: tools.length,
    finish: app.finish ?? null,
    raised,
    hung,
    events: app.events,
    elapsed_ms: Math.round(performance.now() - started),
  };
  return JSON.stringify(line);
}

/**
 * The driver's entry point. `allowed` lists its api/style pairs ("api/style"); `isSdkError`
 * says whether an error belongs to the SDK's own hierarchy (the one its docs tell apps to
 * catch); `body(job, app)` makes one call with a fresh client and fills `app`.
 */
export async function main(sdk, allowed, isSdkError, body) {
  // A rejection nobody awaited must not end the process (and with it the other jobs).
  process.on("unhandledRejection", (e) => {
    process.stderr.write(`${sdk}: unhandled rejection: ${e?.stack ?? e}\n`);
  });
  const argv = process.argv.slice(2);
  const fail = (msg) => {
    process.stderr.write(`${sdk}: ${msg}\nusage: node <driver> <base> <chat|responses|messages> <text|tool> <raw|helper|stream-text> [timeoutMs] [deadlineMs]\n   or: node <driver> --jobs [parallel] < jobs.jsonl\n`);
    process.exit(2);
  };
  if (argv[0] !== "--jobs") {
    const [base, api, mode, style, timeout_ms, deadline_ms] = argv;
    const j = job({ base, api, mode, style, timeout_ms, deadline_ms });
    const bad = invalid(j, allowed);
    if (bad) fail(bad);
    process.stdout.write(`${await runOne(sdk, j, isSdkError, body)}\n`);
    process.exit(0);
  }
  const parallel = Number(argv[1] ?? 8);
  if (!(parallel >= 1)) fail("parallel is a number >= 1");
  const jobs = [];
  for await (const text of createInterface({ input: process.stdin })) {
    if (!text.trim()) continue;
    let j;
    try {
      j = job(JSON.parse(text));
    } catch (e) {
      fail(`a job line is not JSON: ${e.message}: ${text.slice(0, 200)}`);
    }
    const bad = invalid(j, allowed);
    if (bad) fail(`job ${JSON.stringify(j.id)}: ${bad}`);
    jobs.push(j);
  }
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const j = jobs[next++];
      process.stdout.write(`${await runOne(sdk, j, isSdkError, body)}\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, jobs.length) }, worker));
  process.exit(0);
}
