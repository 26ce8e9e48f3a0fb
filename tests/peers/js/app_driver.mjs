// An app on the published TypeScript MCP client (@modelcontextprotocol/client 2.x) pinned to
// MCP 2026-07-28, running one workload against a server, and writing its own ground truth:
// one JSON line per request it POSTed (which logical call, which attempt, original or re-send
// of which call, the JSON-RPC id and the Idempotency-Key it carried) and, per attempt, whether
// it was answered. The truth comes from the app and its fetch, never from the proxy's audit.
//
// Usage: node app_driver.mjs URL WORKLOAD CALLS TOOL ARGS_JSON TRUTH_FILE [CALL_TIMEOUT_MS]
// Workloads:
//   repeat        CALLS calls of TOOL with the same ARGS, one after another; a failed call is
//                 not sent again
//   distinct      the same, each call's arguments made distinct (`item: <k>` added)
//   retry         repeat, with an app-level retry layer: a failed call is sent once more (a
//                 new JSON-RPC id, nothing on the wire says it is a re-send)
//   retry-marked  retry, the layer marking each logical call with an `Idempotency-Key` header
//                 (fresh per call, repeated on its re-send)
//   retry-changed distinct, with the retry layer re-sending a failed call once with other
//                 arguments (`attempt: <n>` added): no call repeats another's arguments
//   give-up       repeat, stopping at the first failed call (the app gives up)
// Truth lines: {"post": n, "method", "rpc_id" (JSON text), "call", "attempt", "resend_of", "key",
// "args" (a tools/call's arguments, else null)} for every POST; {"call", "attempt", "resend_of", "answered", "error"} per tool-call attempt;
// {"done": true} last. Exits 0 when the workload ran (failed calls included), 1 on a harness error.
import { appendFileSync, writeFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, workload, callsText, tool, argsJson, truthPath, timeoutText = "1500"] =
  process.argv.slice(2);
const calls = Number(callsText);
const timeout = Number(timeoutText);
const baseArgs = JSON.parse(argsJson);
if (!["repeat", "distinct", "retry", "retry-marked", "retry-changed", "give-up"].includes(workload)) {
  console.error(`unknown workload ${workload}`);
  process.exit(1);
}
writeFileSync(truthPath, "");
const log = (line) => appendFileSync(truthPath, JSON.stringify(line) + "\n");

// The logical call being made now (calls run one after another), set before each attempt.
let current = null;
let posts = 0;
const recordingFetch = async (input, init) => {
  const method = (init?.method ?? "GET").toUpperCase();
  if (method === "POST" && typeof init?.body === "string") {
    let msg = null;
    try { msg = JSON.parse(init.body); } catch { /* not JSON: not ours to record */ }
    if (msg && typeof msg.method === "string" && msg.id !== undefined) {
      const isCall = msg.method === "tools/call" && current !== null;
      const headers = new Headers(init.headers);
      if (isCall && current.key) headers.set("Idempotency-Key", current.key);
      init = { ...init, headers };
      log({
        post: posts++, method: msg.method, rpc_id: JSON.stringify(msg.id),
        call: isCall ? current.call : null, attempt: isCall ? current.attempt : null,
        resend_of: isCall ? current.resendOf : null, key: isCall ? current.key : null,
        args: msg.method === "tools/call" ? (msg.params?.arguments ?? null) : null,
      });
    }
  }
  return fetch(input, init);
};

const client = new Client({ name: "tearline-app-driver", version: "1.0.0" }, {
  versionNegotiation: {
    mode: { pin: "2026-07-28" },
    probe: { timeoutMs: 10000, maxRetries: 0 },
  },
});
const guard = setTimeout(() => { console.error("driver timed out"); process.exit(3); }, 60000);
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch }));
  await client.listTools();
  const retrying = ["retry", "retry-marked", "retry-changed"].includes(workload);
  const distinct = workload === "distinct" || workload === "retry-changed";
  for (let k = 0; k < calls; k++) {
    const callArgs = distinct ? { ...baseArgs, item: k } : baseArgs;
    const key = workload === "retry-marked" ? randomUUID() : null;
    const attempts = retrying ? 2 : 1;
    let answered = false;
    for (let a = 0; a < attempts && !answered; a++) {
      current = { call: k, attempt: a, resendOf: a > 0 ? k : null, key };
      const args = workload === "retry-changed" ? { ...callArgs, attempt: a } : callArgs;
      let error = null;
      try {
        await client.callTool({ name: tool, arguments: args }, { timeout, onprogress: () => {} });
        answered = true;
      } catch (e) {
        error = String(e?.message ?? e).slice(0, 200);
      }
      log({ call: k, attempt: a, resend_of: a > 0 ? k : null, answered, error });
      current = null;
    }
    if (!answered && workload === "give-up") break;
  }
  log({ done: true });
  await client.close().catch(() => {});
  clearTimeout(guard);
  process.exit(0);
} catch (e) {
  console.error(`app driver: ${e?.stack ?? e}`);
  process.exit(1);
}
