// The SSE parser the HTTP/2 peers share (WHATWG rules: CR, LF or CRLF line ends; `data` and
// `id` fields; an event dispatches on a blank line, and only then does its id become the last
// event id — a torn event never moves the cursor). Fed decoded text piecewise.
export class SseParser {
  constructor(lastId, onEvent) {
    this.lastId = lastId;
    this.pendingId = lastId;
    this.data = null;
    this.line = '';
    this.cr = false;
    this.onEvent = onEvent;
  }

  push(text) {
    for (const ch of text) {
      if (this.cr) {
        this.cr = false;
        if (ch === '\n') continue;
      }
      if (ch === '\r' || ch === '\n') {
        this.cr = ch === '\r';
        this.handle(this.line);
        this.line = '';
      } else {
        this.line += ch;
      }
    }
  }

  handle(line) {
    if (line === '') {
      if (this.data !== null) {
        this.lastId = this.pendingId;
        this.onEvent({ id: this.lastId, data: this.data.join('\n') });
      }
      this.data = null;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (name === 'data') (this.data ??= []).push(value);
    else if (name === 'id' && !value.includes('\0')) this.pendingId = value;
  }
}

// RFC 9113 error code names by number.
export const H2_CODES = [
  'NO_ERROR', 'PROTOCOL_ERROR', 'INTERNAL_ERROR', 'FLOW_CONTROL_ERROR', 'SETTINGS_TIMEOUT',
  'STREAM_CLOSED', 'FRAME_SIZE_ERROR', 'REFUSED_STREAM', 'CANCEL', 'COMPRESSION_ERROR',
  'CONNECT_ERROR', 'ENHANCE_YOUR_CALM', 'INADEQUATE_SECURITY', 'HTTP_1_1_REQUIRED',
];
export const codeName = (n) => H2_CODES[n] ?? String(n);

// One JSON line on stdout: the fields plus `peer`, `event` and `t_ms` since start.
const start = performance.now();
export function logger(peer) {
  return (event, fields = {}) => {
    process.stdout.write(JSON.stringify({ peer, event, t_ms: Math.round(performance.now() - start), ...fields }) + '\n');
  };
}
