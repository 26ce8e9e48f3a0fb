#!/usr/bin/env bash
# Proxy memory vs SSE event size (issue 12): N concurrent sessions each stream one `blob`
# result through `tearline proxy --observe http` (the HTTP/SSE observer and the audit), first
# with 64 KiB events, then with 4 MiB events; the proxy's peak RSS (VmHWM) is read from /proc
# after each run (a fresh proxy per run). Goal: RSS(4 MiB) <= 1.2x RSS(64 KiB): memory per
# connection must not depend on event size.
# Usage: bench/sse_memory.sh [sessions]   (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-1000}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release --quiet
bin=target/release/tearline
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

addr_of() { # file → first 127.0.0.1:PORT in it, waiting up to 10 s
  for _ in $(seq 100); do
    a=$(grep -o '127\.0\.0\.1:[0-9]*' "$1" | head -1 || true)
    [ -n "$a" ] && { echo "$a"; return; }
    sleep 0.1
  done
  echo "no address in $1" >&2; exit 1
}

RUST_LOG=warn,tearline::lab::cli=info $bin serve --listen 127.0.0.1:0 --log-format text >"$tmp/lab" 2>&1 &
pids+=($!)
lab=$(addr_of "$tmp/lab")

run() { # event size in bytes → "peak_rss_kib ok_calls"
  RUST_LOG=warn $bin proxy --listen 127.0.0.1:0 --upstream "$lab" --api off --observe http \
    >"$tmp/proxy.$1" 2>&1 &
  local pid=$!
  pids+=("$pid")
  local addr
  addr=$(addr_of "$tmp/proxy.$1")
  out=$($bin load --target "http://$addr/mcp" --sessions "$sessions" --calls "$sessions" \
        --tool blob --args "{\"size\":$1,\"lines\":3}" --policy strict 2>/dev/null || true)
  local hwm
  hwm=$(awk '/^VmHWM/{print $2}' "/proc/$pid/status")
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$hwm $(echo "$out" | awk '$1=="ok"{print $2}')"
}

printf 'Proxy peak RSS, %s concurrent sessions x one blob result each, --observe http\n' "$sessions"
read -r small small_ok < <(run 65536)
read -r big big_ok < <(run 4194304)
printf '%-22s %10s KiB  (%s calls ok)\n' "64 KiB events" "$small" "${small_ok:-0}"
printf '%-22s %10s KiB  (%s calls ok)\n' "4 MiB events" "$big" "${big_ok:-0}"
printf 'ratio 4 MiB / 64 KiB: %.2fx  (goal <= 1.2)\n' "$(echo "$big $small" | awk '{print $1/$2}')"
