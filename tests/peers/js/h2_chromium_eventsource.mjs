// The browser peer of tearline's HTTP/2 tests: Debian's headless Chromium opens a page served
// by the Node h2 peer server over HTTPS (h2 by ALPN), whose EventSources log on the console what
// they see (the page's protocol, each open, message with its id, error — and reconnects with
// Last-Event-ID, which Chromium does by itself). This driver talks to Chromium over the DevTools
// protocol on a pipe (`--remote-debugging-pipe`: fds 3 and 4, no port), relays every console
// line as a JSON line with "peer":"chromium", and exits when the page says done or on the
// deadline (exit 1), closing the browser either way.
// Usage: node h2_chromium_eventsource.mjs URL [--chromium PATH] [--timeout MS]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { logger } from './h2_sse_parse.mjs';

const log = logger('chromium');
const arg = (name, def) => { const i = process.argv.indexOf(name); return i < 0 ? def : process.argv[i + 1]; };
const url = process.argv[2];
const binary = arg('--chromium', 'chromium');
const timeoutMs = Number(arg('--timeout', '20000'));

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tearline-chromium-'));
const browser = spawn(binary, [
  '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
  '--no-first-run', '--no-default-browser-check', '--disable-extensions',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // The test's certificate is self-signed and made at test time.
  '--ignore-certificate-errors',
  `--user-data-dir=${profile}`, '--remote-debugging-pipe', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
let stderr = '';
browser.stdio[2].on('data', (d) => { stderr = (stderr + d).slice(-4000); });

let exiting = false;
function finish(code, reason) {
  if (exiting) return;
  exiting = true;
  if (reason) log('done', { complete: code === 0, reason });
  // Browser.close lets Chromium end its connections itself; SIGKILL if it lingers.
  const gone = () => {
    try { browser.kill('SIGKILL'); } catch { /* already gone */ }
    fs.rmSync(profile, { recursive: true, force: true });
    process.exit(code);
  };
  browser.once('exit', gone);
  setTimeout(gone, 3000);
  try { toBrowser.write(JSON.stringify({ id: 0, method: 'Browser.close' }) + '\0'); } catch { gone(); }
}
browser.on('error', (e) => { log('error', { message: `cannot start ${binary}: ${e.message}` }); finish(1, 'no-browser'); });
browser.on('exit', (code) => { if (!exiting) { log('error', { message: `chromium exited (${code}): ${stderr}` }); finish(1, 'browser-exit'); } });
const timer = setTimeout(() => finish(1, 'timeout'), timeoutMs);

// The DevTools protocol on the pipe: JSON messages, each ended by a NUL byte.
const toBrowser = browser.stdio[3];
let nextId = 1;
const waiting = new Map();
function send(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  toBrowser.write(JSON.stringify({ id, method, params, sessionId }) + '\0');
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject, method }));
}
let pending = '';
browser.stdio[4].setEncoding('utf8');
browser.stdio[4].on('data', (chunk) => {
  pending += chunk;
  let end;
  while ((end = pending.indexOf('\0')) >= 0) {
    const msg = JSON.parse(pending.slice(0, end));
    pending = pending.slice(end + 1);
    if (msg.id !== undefined && waiting.has(msg.id)) {
      const w = waiting.get(msg.id);
      waiting.delete(msg.id);
      if (msg.error) w.reject(new Error(`${w.method}: ${msg.error.message}`));
      else w.resolve(msg.result);
    } else if (msg.method === 'Runtime.consoleAPICalled') {
      for (const a of msg.params.args) {
        let line;
        try { line = JSON.parse(a.value); } catch { line = { event: 'console', text: String(a.value) }; }
        const { event = 'console', ...fields } = line;
        log(event, fields);
        if (line.event === 'done') { clearTimeout(timer); finish(0, null); }
      }
    } else if (msg.method === 'Runtime.exceptionThrown') {
      log('error', { message: msg.params.exceptionDetails.text });
    }
  }
});

try {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  await send('Runtime.enable', {}, sessionId);
  await send('Page.enable', {}, sessionId);
  await send('Page.navigate', { url }, sessionId);
} catch (e) {
  log('error', { message: e.message });
  finish(1, 'devtools');
}
