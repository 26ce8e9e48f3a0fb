// A real MCP TypeScript client against a server: tools/list, then a streamed tools/call with
// progress. Prints one JSON line: {era, tools, progress, text}. Exits non-zero on any error.
// Usage: node lab_client.mjs <url> <sdk1|sdk2-legacy|sdk2-auto|sdk2-2026> [tool] [argsJSON]
const [url, flavour, tool = "progress", argsJson = '{"n":3}'] = process.argv.slice(2);
let Client, Transport, options = {};
if (flavour === "sdk1") {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StreamableHTTPClientTransport: Transport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
} else {
  ({ Client, StreamableHTTPClientTransport: Transport } = await import("@modelcontextprotocol/client"));
  const mode = { "sdk2-legacy": "legacy", "sdk2-auto": "auto", "sdk2-2026": { pin: "2026-07-28" } }[flavour];
  if (mode === undefined) throw new Error(`unknown flavour ${flavour}`);
  options = { versionNegotiation: { mode } };
}
const client = new Client({ name: `tearline-${flavour}`, version: "1.0.0" }, options);
const timer = setTimeout(() => { console.error("timed out"); process.exit(3); }, 20000);
try {
  await client.connect(new Transport(new URL(url)));
  const listed = await client.listTools();
  let progress = 0;
  const params = { name: tool, arguments: JSON.parse(argsJson) };
  const opts = { onprogress: () => { progress += 1; }, timeout: 15000 };
  // SDK 1.x takes a result schema second; 2.x takes the options second.
  const result = flavour === "sdk1"
    ? await client.callTool(params, undefined, opts)
    : await client.callTool(params, opts);
  const text = (result.content ?? []).map((c) => c.text ?? "").join("");
  const era = client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion ?? null;
  console.log(JSON.stringify({ era, tools: listed.tools.map((t) => t.name), progress, text: text.slice(0, 200) }));
  await client.close();
  clearTimeout(timer);
  process.exit(0);
} catch (e) {
  console.error(`${flavour}: ${e?.stack ?? e}`);
  process.exit(1);
}
