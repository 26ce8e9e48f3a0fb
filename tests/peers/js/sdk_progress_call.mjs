// One `progress` tool call by the published TypeScript MCP SDK client (Streamable HTTP
// transport, resumes with Last-Event-ID), printed as one JSON line: {ok, text} or {ok, error}.
// Usage: node sdk_progress_call.mjs URL   (HTTPS: trust the CA with NODE_EXTRA_CA_CERTS)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const client = new Client({ name: "tearline-sdk-peer", version: "0.0.0" });
const transport = new StreamableHTTPClientTransport(url, {
  reconnectionOptions: {
    initialReconnectionDelay: 50,
    maxReconnectionDelay: 200,
    reconnectionDelayGrowFactor: 1.5,
    maxRetries: 5,
  },
});
let result;
try {
  await client.connect(transport);
  const r = await client.callTool(
    { name: "progress", arguments: { n: 6, interval: 0 } },
    undefined,
    { timeout: 15000, onprogress: () => {} },
  );
  result = { ok: true, text: r.content?.[0]?.text ?? null };
} catch (e) {
  result = { ok: false, error: String(e) };
}
console.log(JSON.stringify(result));
await client.close().catch(() => {});
process.exit(0);
