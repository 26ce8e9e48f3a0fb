#!/usr/bin/env bash
# Local rehearsal of the multi-agent flow (what deploy/kubernetes/ runs on a cluster): one lab
# server, two tearline proxies in front of it (each with the fault profile and its own cut and
# findings logs), N load agents as separate processes each running segment i/N of one plan
# (shared seed and start time; agents alternate between the two proxies), then
# `tearline report merge` of the agents' report directories with the proxies' logs.
#
# Usage: bench/rehearse.sh            (4 agents, plan of 10,000 sessions and 10,000 calls)
#   AGENTS=4 SESSIONS=10000 CALLS=10000   the plan and the number of agents (segments)
#   RATE=250                              plan-wide open-loop rate, calls/s (default: closed loop;
#                                         each session then opens at once and calls back to back)
#   SIZE=16384 LINES=3                    blob result size (bytes) and data: lines per result
#   POLICY=strict|naive                   client policy of the agents
#   PROFILE=bench/rehearsal.toml          the proxies' fault profile; SEED=42
#   FAIL_ON='silent-loss>0'               thresholds judged on the merged report (repeat with ;)
#   OUT=bench/out/rehearsal-<stamp>       where everything is written
#   TEARLINE=target/release/tearline      the binary (built with cargo build --release if absent)
# Exit status: the merge's (0 pass, 99 a threshold failed, 2 error); 1 if a process failed.
set -euo pipefail
cd "$(dirname "$0")/.."

AGENTS="${AGENTS:-4}"
SESSIONS="${SESSIONS:-10000}"
CALLS="${CALLS:-$SESSIONS}"
SIZE="${SIZE:-16384}"
LINES="${LINES:-3}"
POLICY="${POLICY:-strict}"
PROFILE="${PROFILE:-bench/rehearsal.toml}"
SEED="${SEED:-42}"
OUT="${OUT:-bench/out/rehearsal-$(date -u +%Y%m%dT%H%M%SZ)}"
BIN="${TEARLINE:-target/release/tearline}"
if [[ ! -x "$BIN" ]]; then
  cargo build --release --bin tearline
fi
mkdir -p "$OUT"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# wait_for FILE PATTERN: up to 30 s for PATTERN to appear in FILE.
wait_for() {
  for _ in $(seq 300); do
    if grep -q "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "rehearse: $1 never showed '$2'" >&2
  cat "$1" >&2 || true
  exit 1
}

RUST_LOG=info "$BIN" serve --listen 127.0.0.1:0 --max-sessions $((SESSIONS * 3 + 100)) \
  >"$OUT/lab.log" 2>&1 &
pids+=($!)
wait_for "$OUT/lab.log" "lab server listening"
lab="$(sed 's/\x1b\[[0-9;]*m//g' "$OUT/lab.log" | grep -o 'addr=[0-9.]*:[0-9]*' | head -1 | cut -d= -f2)"
[[ -n "$lab" ]] || { echo "rehearse: no lab address in $OUT/lab.log" >&2; exit 1; }

proxy_addr=()
for p in 1 2; do
  mkdir -p "$OUT/proxy-$p"
  RUST_LOG=warn "$BIN" proxy --name "edge-$p" --listen 127.0.0.1:0 --upstream "$lab" \
    --profile "$PROFILE" --seed "$SEED" --api off --max-connections 60000 \
    --cuts-log "$OUT/proxy-$p/cuts.jsonl" --findings-log "$OUT/proxy-$p/findings.jsonl" \
    >"$OUT/proxy-$p/out.log" 2>&1 &
  pids+=($!)
  wait_for "$OUT/proxy-$p/out.log" "listening on"
  proxy_addr+=("$(grep -o 'listening on [0-9.]*:[0-9]*' "$OUT/proxy-$p/out.log" | head -1 | cut -d' ' -f3)")
done

start_at="$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)"
echo "rehearse: lab $lab, proxies ${proxy_addr[*]}, $AGENTS agents, plan $SESSIONS sessions / $CALLS calls, start $start_at, out $OUT"
agents=()
for i in $(seq "$AGENTS"); do
  addr="${proxy_addr[$(( (i - 1) % 2 ))]}"
  "$BIN" load --target "http://$addr/mcp" --sessions "$SESSIONS" --calls "$CALLS" \
    --tool blob --args "{\"size\":$SIZE,\"lines\":$LINES}" --policy "$POLICY" ${RATE:+--rate "$RATE"} \
    --timeout 60s --connect-timeout 20s --segment "$i/$AGENTS" --seed "$SEED" \
    --start-at "$start_at" --report-dir "$OUT/agent-$i" >"$OUT/agent-$i.txt" 2>&1 &
  agents+=($!)
done
failed=0
for i in "${!agents[@]}"; do
  if ! wait "${agents[$i]}"; then
    echo "rehearse: agent $((i + 1)) failed:" >&2
    tail -5 "$OUT/agent-$((i + 1)).txt" >&2
    failed=1
  fi
done
[[ $failed == 0 ]] || exit 1

# Stop the proxies (SIGTERM: drain, flush their logs) and the lab.
cleanup
pids=()

merge=("$BIN" report merge)
for i in $(seq "$AGENTS"); do merge+=("$OUT/agent-$i"); done
merge+=(-o "$OUT/merged")
for p in 1 2; do merge+=(--cuts "$OUT/proxy-$p/cuts.jsonl" --findings "$OUT/proxy-$p/findings.jsonl"); done
if [[ -n "${FAIL_ON:-}" ]]; then
  IFS=';' read -ra thresholds <<<"$FAIL_ON"
  for t in "${thresholds[@]}"; do merge+=(--fail-on "$t"); done
fi
set +e
"${merge[@]}" >"$OUT/merge.txt" 2>&1
status=$?
set -e
head -3 "$OUT/merge.txt"

# Per-agent and merged figures, one line each.
python3 - "$OUT" "$AGENTS" <<'PY'
import json, sys, pathlib
out, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
print(f"{'report':<10} {'segment':<17} {'secs':>6} {'calls':>6} {'ok':>6} {'failed':>6} {'lost':>5} {'resumes':>7} {'cuts':>5} {'p50 call':>9} {'p99 call':>9} {'max call':>9}")
for name in [f"agent-{i}" for i in range(1, n + 1)] + ["merged"]:
    r = json.loads((out / name / "report.json").read_text())
    for policy, p in r["policies"].items():
        c, h = p["counters"], p["histograms"].get("call", {})
        ms = lambda k: f"{h.get(k, 0) / 1000:.1f}ms"
        print(f"{name:<10} {r['facts'].get('segment', '-'):<17} {r['facts']['duration_ms'] / 1000:>6.1f} "
              f"{c['calls']:>6} {c['ok']:>6} {c['failed']:>6} {c['silent-loss']:>5} {c['resumes']:>7} "
              f"{r['cuts']['total']:>5} {ms('p50'):>9} {ms('p99'):>9} {ms('max'):>9}")
PY
echo "rehearse: merged report in $OUT/merged (merge exit $status)"
exit "$status"
