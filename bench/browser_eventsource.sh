#!/usr/bin/env bash
# A real browser's EventSource through `tearline proxy` with an `sse_cut` profile (issue 13):
# headless Chromium opens the lab's plain SSE feed (no MCP, no session) through the proxy, the
# proxy cuts streams mid-event, the browser resumes with Last-Event-ID (and fetches a 404
# /favicon.ico once, on the same origin), and the page dumps what it dispatched. The script
# prints the audit's findings next to what the page got: with a correct server and a correct
# client the audit must say only `torn-cut` (one per cut) and `replay-exact`.
#
# Not in CI (CI cannot be assumed to have a browser). Needs chromium (Debian: apt-get install
# chromium) and python3. Usage:
#   bench/browser_eventsource.sh                 # builds tearline (dev profile) if needed
#   TEARLINE=target/release/tearline CHROMIUM=chromium SEED=7 bench/browser_eventsource.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TEARLINE=${TEARLINE:-target/debug/tearline}
CHROMIUM=${CHROMIUM:-chromium}
SEED=${SEED:-7}
[ -x "$TEARLINE" ] || cargo build --profile dev --bin tearline
command -v "$CHROMIUM" >/dev/null || { echo "no $CHROMIUM on PATH (apt-get install chromium)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
LAB=$(free_port)
PROXY=$(free_port)

cat >"$work/cut.toml" <<TOML
description = "every plain SSE stream cut inside an event's data (or before its dispatch), then reset"
[[fault]]
name = "torn"
kind = "sse_cut"
at = { mid-value = 3, before-dispatch = 1, after-id = 1 }
events = [2, 10]
method = "GET"
path = "/events"
action = "reset"
TOML

"$TEARLINE" serve --listen "127.0.0.1:$LAB" --plain-path /events --retry 50ms \
  >"$work/lab.log" 2>&1 &
pids+=($!)
"$TEARLINE" proxy --listen "127.0.0.1:$PROXY" --upstream "127.0.0.1:$LAB" --api off \
  --seed "$SEED" --profile "$work/cut.toml" --findings-log "$work/findings.jsonl" \
  --cuts-log "$work/cuts.jsonl" >"$work/proxy.log" 2>&1 &
proxy_pid=$!
pids+=($proxy_pid)
for _ in $(seq 50); do
  (echo >"/dev/tcp/127.0.0.1/$PROXY") 2>/dev/null && (echo >"/dev/tcp/127.0.0.1/$LAB") 2>/dev/null && break
  sleep 0.1
done

# The page is served by nothing: it is a file, and the feed is cross-origin, so Chromium runs
# with web security off (a throwaway profile directory) instead of the lab sending CORS headers.
cat >"$work/page.html" <<HTML
<!doctype html><html><body><pre id="out">pending</pre><script>
const base = "http://127.0.0.1:$PROXY";
const got = []; let opens = 0, errors = 0, side = null;
const es = new EventSource(base + "/events");
es.onopen = () => { opens++; };
es.onerror = () => {
  errors++;
  if (side === null) { side = "sent"; fetch(base + "/favicon.ico").then(r => { side = r.status; }, () => { side = "failed"; }); }
};
es.onmessage = (e) => {
  got.push({id: e.lastEventId, data: e.data});
  if (e.data.includes('"last":true')) { es.close(); setTimeout(done, 200); }
};
function done() { document.getElementById("out").textContent = "RESULT " + JSON.stringify({opens, errors, side, got}); }
setTimeout(done, 8000);
</script></body></html>
HTML

timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-web-security \
  --user-data-dir="$work/profile" --virtual-time-budget=15000 --dump-dom \
  "file://$work/page.html" >"$work/dom.html" 2>"$work/chromium.log" || true

# Let the proxy see the connections go, then stop it (its audit settles at shutdown).
sleep 1
kill -INT "$proxy_pid" 2>/dev/null || true
wait "$proxy_pid" 2>/dev/null || true

python3 - "$work" <<'PY'
import html, json, re, sys, collections
work = sys.argv[1]
dom = open(f"{work}/dom.html").read()
m = re.search(r"RESULT (\{.*\})", html.unescape(dom))
if not m:
    print("the page produced no result; chromium said:")
    print(open(f"{work}/chromium.log").read()[-2000:])
    sys.exit(1)
page = json.loads(m.group(1))
ids = [e["id"] for e in page["got"]]
ticks = [json.loads(e["data"])["tick"] for e in page["got"]]
n = json.loads(page["got"][-1]["data"])["of"] if page["got"] else 0
dups = [t for t, c in collections.Counter(ticks).items() if c > 1]
missing = sorted(set(range(n)) - set(ticks))
in_order = ticks == sorted(ticks)
print(f"page: {len(ticks)} event(s) dispatched over {page['opens']} open(s), {page['errors']} error(s); "
      f"side request /favicon.ico -> {page['side']}")
print(f"page truth: complete={bool(ticks) and ticks[-1] == n - 1 and not missing}, duplicates={dups}, "
      f"missing={missing}, in order={in_order}")
findings = [json.loads(l) for l in open(f"{work}/findings.jsonl") if l.strip()]
kinds = collections.Counter(f["kind"] for f in findings)
cuts = sum(1 for l in open(f"{work}/cuts.jsonl") if l.strip())
print(f"proxy: {cuts} cut(s); audit findings: {dict(sorted(kinds.items()))}")
for f in findings:
    print(f"  {f['kind']:<14} {f.get('detail', '')[:150]}")
expected = {"torn-cut", "replay-exact"}
truth_clean = not dups and not missing and in_order
extra = set(kinds) - expected
verdict = "AGREE" if truth_clean and not extra and kinds.get("replay-exact", 0) > 0 else "DISAGREE"
print(f"verdict: {verdict} (the page lost nothing, so only torn-cut and replay-exact may appear; "
      f"extra kinds: {sorted(extra) or 'none'})")
sys.exit(0 if verdict == "AGREE" else 1)
PY
