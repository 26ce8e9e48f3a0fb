// The Node peer client of tearline's HTTP/2 tests, on Node's own `http2` module: one session
// (h2c prior knowledge for http://, ALPN h2 for https:// trusting --ca), every named SSE
// stream opened on it at once. A stream that ends before event N (reset, or ended early) is
// resumed on a new stream with Last-Event-ID — on the same session while it lives, else on a
// new session — up to --resume times.
// Logs JSON lines: session (ALPN), response (status, h2 stream id, time), message (id, data,
// h2 stream id), reset (h2 stream id and RST_STREAM code), closed_with_session (a stream that
// ended because its session did), goaway (code, last stream id), resume (Last-Event-ID, new h2
// stream id), reconnect, end, error, done.
// Usage: node h2_sse_client.mjs URL --streams a,b --n N [--query Q] [--ca CA] [--resume K]
//        [--retry-delay MS] [--timeout MS] [--query-for NAME:Q]...
// --retry-delay waits that long before each resume (default 0: at once), as an application
// that backs off before it retries.
// --query-for gives stream NAME its own query instead of --query (so two streams of one
// session can be paced apart: one held mid-event while the other is cut).
import http2 from 'node:http2';
import fs from 'node:fs';
import { SseParser, codeName, logger } from './h2_sse_parse.mjs';

const log = logger('node-client');
const arg = (name, def) => { const i = process.argv.indexOf(name); return i < 0 ? def : process.argv[i + 1]; };
const base = process.argv[2];
const streams = arg('--streams', 'a').split(',');
const n = Number(arg('--n', '5'));
const query = arg('--query', '');
const queryFor = new Map();
process.argv.forEach((a, i) => {
  if (a !== '--query-for') return;
  const v = process.argv[i + 1] ?? '';
  const at = v.indexOf(':');
  if (at > 0) queryFor.set(v.slice(0, at), v.slice(at + 1));
});
const ca = arg('--ca', null);
const resumes = Number(arg('--resume', '0'));
const timeoutMs = Number(arg('--timeout', '20000'));
const retryDelay = Number(arg('--retry-delay', '0'));

let session = null;
function connect() {
  const s = http2.connect(base, ca ? { ca: fs.readFileSync(ca) } : {});
  s.on('connect', () => log('session', { alpn: s.alpnProtocol ?? null }));
  s.on('goaway', (code, lastStreamID) => log('goaway', { code: codeName(code), last_stream: lastStreamID }));
  s.on('error', (e) => log('error', { message: e.message }));
  s.on('close', () => { if (session === s) session = null; });
  session = s;
  return s;
}
const live = () => session && !session.closed && !session.destroyed;

function follow(name) {
  return new Promise((resolve) => {
    let last = '';
    let tries = 0;
    const open = () => {
      if (!live()) {
        if (session) log('reconnect', { stream: name });
        connect();
      }
      const q = queryFor.get(name) ?? query;
      const path = `/sse?stream=${name}&n=${n}${q ? '&' + q : ''}`;
      const headers = { ':path': path, accept: 'text/event-stream' };
      if (last) headers['last-event-id'] = last;
      let req;
      try {
        req = session.request(headers);
      } catch (e) {
        log('error', { stream: name, message: e.message });
        return finish();
      }
      if (last) log('resume', { stream: name, last_event_id: last, h2_stream: req.id ?? null });
      const parser = new SseParser(last, (ev) => {
        last = ev.id;
        log('message', { stream: name, h2_stream: req.id, id: ev.id, data: ev.data });
      });
      req.setEncoding('utf8');
      req.on('response', (h) => log('response', { stream: name, h2_stream: req.id, status: h[':status'] }));
      req.on('data', (chunk) => parser.push(chunk));
      req.on('end', () => log('end', { stream: name, h2_stream: req.id, last_id: last }));
      req.on('error', (e) => log('error', { stream: name, h2_stream: req.id, message: e.message }));
      const own = session;
      req.on('close', () => {
        const alive = !own.closed && !own.destroyed;
        // A non-zero code on a live session is an RST_STREAM; when the session itself ended,
        // Node closes its streams with a code of its own, which is no frame on the wire.
        if (req.rstCode && alive) log('reset', { stream: name, h2_stream: req.id, code: codeName(req.rstCode) });
        else if (req.rstCode) log('closed_with_session', { stream: name, h2_stream: req.id, code: codeName(req.rstCode) });
        finish();
      });
    };
    const finish = () => {
      if (last === String(n) || tries >= resumes) return resolve(last === String(n));
      tries += 1;
      if (retryDelay > 0) setTimeout(open, retryDelay);
      else open();
    };
    open();
  });
}

const timer = setTimeout(() => { log('done', { complete: false, reason: 'timeout' }); process.exit(1); }, timeoutMs);
const results = await Promise.all(streams.map(follow));
clearTimeout(timer);
const complete = results.every(Boolean);
log('done', { complete });
if (live()) session.close();
process.exitCode = complete ? 0 : 1;
