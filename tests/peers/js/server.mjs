// A small real MCP server on @modelcontextprotocol/server 2.x (createMcpHandler: 2026-07-28 plus
// the SDK's stateless 2025 fallback), mounted on node:http. Tools: `work` (idempotent: `n`
// progress notifications then a text result padded to `pad` bytes) and `append` (NOT
// idempotent: adds 1 to a counter). Prints `listening <port>` once ready; GET /counter answers
// the counter. Usage: node server.mjs
import http from "node:http";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import * as z from "zod";

let counter = 0;
function factory() {
  const server = new McpServer({ name: "ts-sdk2-server", version: "1.0.0" });
  const progress = async (ctx, i, total) => {
    const token = ctx?.mcpReq?._meta?.progressToken;
    if (token !== undefined) {
      await ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: token, progress: i, total } });
    }
  };
  server.registerTool("work", {
    description: "n progress notifications, then a padded text result",
    inputSchema: { n: z.number().int().optional(), pad: z.number().int().optional() },
    annotations: { readOnlyHint: true, idempotentHint: true },
  }, async ({ n = 2, pad = 0 }, ctx) => {
    for (let i = 1; i <= n; i++) await progress(ctx, i, n);
    return { content: [{ type: "text", text: `work done: ${n} ` + "x".repeat(pad) }] };
  });
  server.registerTool("append", {
    description: "adds 1 to a server-side counter",
    inputSchema: {},
    annotations: { readOnlyHint: false, idempotentHint: false, destructiveHint: false },
  }, async (_args, ctx) => {
    counter += 1;
    await progress(ctx, 1, 1);
    return { content: [{ type: "text", text: `appended: ${counter}` }] };
  });
  return server;
}

const handler = createMcpHandler(factory);
const srv = http.createServer(async (req, res) => {
  if (req.method === "GET" && req.url === "/counter") {
    res.writeHead(200, { "content-type": "text/plain" }).end(String(counter));
    return;
  }
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, String(v));
  const hasBody = !["GET", "HEAD"].includes(req.method);
  const request = new Request(`http://${req.headers.host ?? "127.0.0.1"}${req.url}`, {
    method: req.method, headers, body: hasBody ? Buffer.concat(chunks) : undefined, signal: abort.signal,
  });
  try {
    const r = await handler.fetch(request);
    res.writeHead(r.status, Object.fromEntries(r.headers));
    if (r.body) for await (const c of r.body) res.write(c);
    res.end();
  } catch (e) {
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});
srv.listen(0, "127.0.0.1", () => console.log(`listening ${srv.address().port}`));
