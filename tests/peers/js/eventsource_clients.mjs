// N browser-like EventSource clients (npm `eventsource`, WHATWG semantics) on one URL: each
// reconnects by itself after a cut, with `Last-Event-ID`, and stops once it dispatched the
// feed's final event (data holding "last":true). Prints one JSON line per client, then exits
// 0 when every client finished (1 on the deadline).
// Usage: node eventsource_clients.mjs URL N TIMEOUT_MS
import { EventSource } from 'eventsource';

const [url, n, timeoutMs] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const results = [];
const done = [];
for (let i = 0; i < n; i++) {
  done.push(new Promise((resolve) => {
    const r = { client: i, ids: [], empty: 0, errors: 0, complete: false };
    results.push(r);
    const es = new EventSource(url);
    es.onmessage = (ev) => {
      if (ev.data === '') { r.empty++; return; }
      r.ids.push(ev.lastEventId);
      if (JSON.parse(ev.data).last === true) { r.complete = true; es.close(); resolve(); }
    };
    es.onerror = () => { r.errors++; };
  }));
}
const timer = setTimeout(() => {
  for (const r of results) console.log(JSON.stringify(r));
  process.exit(1);
}, timeoutMs);
await Promise.all(done);
clearTimeout(timer);
for (const r of results) console.log(JSON.stringify(r));
process.exit(0);
