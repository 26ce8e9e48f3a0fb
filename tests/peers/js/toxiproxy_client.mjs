// The published npm Toxiproxy client (toxiproxy-node-client, pinned) drives a Toxiproxy API:
// version, create, list, get, add/update/remove a latency toxic, populate, reset, delete.
// Usage: node toxiproxy_client.mjs API_HOST:PORT UPSTREAM_HOST:PORT
// Prints one JSON line per step ({"step": ..., ...}); exits 1 on the first failure.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Toxiproxy } = require("toxiproxy-node-client");

const [api, upstream] = process.argv.slice(2);
const toxiproxy = new Toxiproxy(`http://${api}`);
const out = (step, v) => console.log(JSON.stringify({ step, ...v }));

try {
  out("version", { version: await toxiproxy.getVersion() });
  const proxy = await toxiproxy.createProxy({ name: "node", listen: "127.0.0.1:0", upstream });
  out("create", { name: proxy.name, listen: proxy.listen, enabled: proxy.enabled });
  const all = await toxiproxy.getAll();
  out("list", { names: Object.keys(all) });
  const toxic = await proxy.addToxic({ name: "lat", type: "latency", stream: "downstream",
    toxicity: 1, attributes: { latency: 50, jitter: 0 } });
  out("add", { name: toxic.name, type: toxic.type, attributes: toxic.attributes });
  const updated = await toxic.update({ attributes: { latency: 75 }, toxicity: 0.5 });
  out("update", { attributes: updated.attributes, toxicity: updated.toxicity });
  const got = await (await toxiproxy.get("node")).getToxic("lat");
  out("get", { attributes: got.attributes });
  await got.remove();
  let gone = false;
  try {
    await (await toxiproxy.get("node")).getToxic("lat");
  } catch (e) {
    gone = true; // the client rejects the 404 "toxic not found"
  }
  out("remove", { gone });
  const populated = await toxiproxy.populate([{ name: "pop", listen: "127.0.0.1:0", upstream }]);
  out("populate", { names: Object.keys(populated) });
  await toxiproxy.reset();
  out("reset", {});
  await proxy.remove();
  out("delete", { names: Object.keys(await toxiproxy.getAll()) });
} catch (e) {
  console.error(`FAILED: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
}
