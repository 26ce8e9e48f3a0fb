// The Node peer server of tearline's HTTP/2 tests, on Node's own `http2` module: h2c (prior
// knowledge) by default, h2 over TLS (ALPN h2 only) with --cert/--key. On 127.0.0.1, port 0.
//   GET /sse?stream=NAME&n=N&interval=MS&first_delay=MS&size=BYTES&retry=MS&split=MS
//     numbered SSE events id 1..N after the request's Last-Event-ID (replay from there), each
//     `id: K` + `data: {"stream","n","pad"}`, then the end of the stream; 204 when nothing is
//     left (so an EventSource stops reconnecting). With `split`, each event is written in two
//     writes (two DATA frames) `split` ms apart, torn inside its data value.
//   GET /page?streams=a,b&n=N&...  an HTML page whose EventSources follow those streams and
//     log what they see on the console (the Chromium peer reads it).
// Logs JSON lines: listening, session (with ALPN), request (with the h2 stream id and
// Last-Event-ID), reset (a stream closed with a non-zero code, who sent it unknown to Node),
// goaway, end.
// Usage: node h2_sse_server.mjs [--cert CERT --key KEY]
import http2 from 'node:http2';
import fs from 'node:fs';
import { codeName, logger } from './h2_sse_parse.mjs';

const log = logger('node-server');
const arg = (name) => { const i = process.argv.indexOf(name); return i < 0 ? null : process.argv[i + 1]; };
const cert = arg('--cert');
const key = arg('--key');
const tls = cert !== null;
// MAX_CONCURRENT_STREAMS is announced (Node leaves it out by default, meaning unlimited), as
// nginx (128) and Go (250) do: httpcore opens one stream at a time until a server names it.
const settings = { maxConcurrentStreams: 100 };
const server = tls
  ? http2.createSecureServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key), allowHTTP1: false, settings })
  : http2.createServer({ settings });

server.on('session', (session) => {
  log('session', { alpn: session.alpnProtocol ?? null });
  session.on('goaway', (code, lastStreamID) => log('goaway', { code: codeName(code), last_stream: lastStreamID }));
  session.on('error', (e) => log('error', { message: e.message }));
});

function page(q) {
  const streams = (q.get('streams') ?? 'a').split(',');
  const rest = new URLSearchParams(q);
  rest.delete('streams');
  return `<!doctype html><meta charset="utf-8"><title>h2 sse</title><pre id="log"></pre><script>
const say = (o) => { console.log(JSON.stringify(o)); document.getElementById('log').textContent += JSON.stringify(o) + '\\n'; };
const nav = performance.getEntriesByType('navigation')[0];
say({ event: 'page', protocol: nav ? nav.nextHopProtocol : null });
const n = ${Number(q.get('n') ?? 5)};
const streams = ${JSON.stringify(streams)};
let left = streams.length;
for (const s of streams) {
  const es = new EventSource('/sse?stream=' + s + '&${rest.toString()}');
  es.onopen = () => say({ event: 'open', stream: s });
  es.onmessage = (e) => {
    say({ event: 'message', stream: s, id: e.lastEventId, data: e.data });
    if (e.lastEventId === String(n)) { es.close(); say({ event: 'end', stream: s }); if (--left === 0) say({ event: 'done' }); }
  };
  es.onerror = () => say({ event: 'error', stream: s, ready_state: es.readyState });
}
</script>`;
}

server.on('stream', (stream, headers) => {
  const url = new URL(headers[':path'], 'http://peer');
  const q = url.searchParams;
  const name = q.get('stream') ?? '';
  const last = headers['last-event-id'] ?? '';
  log('request', { h2_stream: stream.id, path: url.pathname, stream: name, last_event_id: last });
  let timer = null;
  stream.on('close', () => {
    clearTimeout(timer);
    if (stream.rstCode) log('reset', { h2_stream: stream.id, stream: name, code: codeName(stream.rstCode) });
  });
  stream.on('error', (e) => log('error', { h2_stream: stream.id, stream: name, message: e.message }));
  if (url.pathname === '/page') {
    stream.respond({ ':status': 200, 'content-type': 'text/html; charset=utf-8' });
    stream.end(page(q));
    return;
  }
  if (url.pathname !== '/sse') {
    stream.respond({ ':status': 404 });
    stream.end();
    return;
  }
  const n = Number(q.get('n') ?? 5);
  const interval = Number(q.get('interval') ?? 20);
  const firstDelay = Number(q.get('first_delay') ?? 0);
  const pad = 'x'.repeat(Number(q.get('size') ?? 0));
  let next = (Number.parseInt(last, 10) || 0) + 1;
  if (next > n) {
    stream.respond({ ':status': 204 });
    stream.end();
    return;
  }
  stream.respond({ ':status': 200, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const retry = q.get('retry');
  if (retry !== null) stream.write(`retry: ${Number(retry)}\n\n`);
  const split = q.get('split');
  const send = () => {
    if (stream.destroyed || stream.closed) return;
    const ev = `id: ${next}\ndata: ${JSON.stringify({ stream: name, n: next, pad })}\n\n`;
    if (split !== null && !send.half) {
      // The first half now, the rest (and the next event) `split` ms later.
      const cut = ev.indexOf('"pad":"') + 7 + Math.floor(pad.length / 2);
      stream.write(ev.slice(0, cut));
      send.half = ev.slice(cut);
      timer = setTimeout(send, Number(split));
      return;
    }
    stream.write(send.half ?? ev);
    send.half = null;
    if (next === n) {
      stream.end();
      log('end', { h2_stream: stream.id, stream: name, last_id: n });
      return;
    }
    next += 1;
    timer = setTimeout(send, interval);
  };
  timer = setTimeout(send, firstDelay);
});

server.listen(0, '127.0.0.1', () => log('listening', { port: server.address().port, proto: tls ? 'h2' : 'h2c' }));
