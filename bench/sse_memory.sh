#!/usr/bin/env bash
# Proxy memory vs SSE event size (issue 12): N concurrent sessions each call `blob` (one result
# event of 3 data lines) through `tearline proxy --observe http` (the HTTP/SSE observer and
# the audit), first with 64 KiB events, then with 4 MiB events, a fresh proxy per size.
#
# Same concurrency for both sizes: the lab pauses every result mid-way through its last data
# line until all N streams are paused there at once (`blob` arguments "gate": N), then keeps
# them paused for HOLD seconds ("hold_ms"). The bench waits for the gate to open and for the
# proxy to go idle (every byte before the pauses relayed), then samples, at that moment, the
# proxy's RSS (VmRSS) and its established client connections; after the run, its peak RSS
# (the larger of VmHWM and VmRSS polled every 0.2 s). Goal: RSS(4 MiB) <= 1.2x RSS(64 KiB): memory per connection must not depend on
# event size.
#
# Usage: bench/sse_memory.sh [sessions] [hold_seconds]   (defaults 1000, 60)
#        PROXY_BIN=path/to/tearline bench/sse_memory.sh …   measures another build's proxy
#        (the lab and the load client stay this tree's: the gate needs this lab)
# The lab holds every event at once (sessions x size: 4 GB at 1,000 x 4 MiB), and so does the
# load client: check free memory first.
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-1000}
hold=${2:-60}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cargo build --release --quiet
bin=target/release/tearline
proxy_bin=${PROXY_BIN:-$bin}
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

cpu_ticks() { # pid → user + system clock ticks so far
  awk '{print $14 + $15}' "/proc/$1/stat"
}

status_kib() { # pid field → value in KiB from /proc/pid/status
  awk -v f="$2:" '$1==f{print $2}' "/proc/$1/status"
}

peak=0
sample_peak() { # pid → keeps the largest VmRSS seen in $peak (VmHWM misses memory the
  # allocator returns with madvise, so the bench polls too)
  local r
  r=$(status_kib "$1" VmRSS 2>/dev/null || echo 0)
  [ "${r:-0}" -gt "$peak" ] && peak=$r
  return 0
}

RUST_LOG=warn,tearline::lab::cli=info,tearline::lab::hold=info \
  $bin serve --listen 127.0.0.1:0 --log-format text >"$tmp/lab" 2>&1 &
pids+=($!)
lab=$(addr_of "$tmp/lab")

run() { # event size in bytes → "rss_kib conns hwm_kib ok_calls after_gate_s"
  local size=$1
  RUST_LOG=warn $proxy_bin proxy --listen 127.0.0.1:0 --upstream "$lab" --api off --observe http \
    >"$tmp/proxy.$size" 2>&1 &
  local pid=$!
  pids+=("$pid")
  local addr port
  addr=$(addr_of "$tmp/proxy.$size")
  port=${addr##*:}
  local gates
  gates=$(grep -c 'gate opened' "$tmp/lab" || true)
  # (This function runs in a subshell: it stops what it started itself.)
  $bin load --target "http://$addr/mcp" --sessions "$sessions" --calls "$sessions" \
    --tool blob --args "{\"size\":$size,\"lines\":3,\"hold_ms\":$((hold * 1000)),\"gate\":$sessions}" \
    --policy strict --timeout "$((hold + 600))s" --connect-timeout 60s \
    >"$tmp/load.$size" 2>&1 &
  local load=$!
  pids+=("$load")
  # 1. The gate opens: every stream is paused mid-event at the lab at once.
  until [ "$(grep -c 'gate opened' "$tmp/lab" || true)" -gt "$gates" ]; do
    if ! kill -0 "$load" 2>/dev/null; then
      echo "load ended before the gate opened (size $size):" >&2
      tail -5 "$tmp/load.$size" >&2
      kill "$pid" 2>/dev/null || true
      exit 1
    fi
    sample_peak "$pid"
    sleep 0.2
  done
  local opened=$SECONDS
  # 2. The proxy goes idle: at most 2 CPU ticks in a second, twice in a row (the bytes before
  #    the pauses have been relayed). Bounded by the hold.
  local quiet=0 t0 t1
  t0=$(cpu_ticks "$pid")
  while [ "$quiet" -lt 2 ] && [ $((SECONDS - opened)) -lt $((hold - 5)) ]; do
    sleep 1
    t1=$(cpu_ticks "$pid")
    if [ $((t1 - t0)) -le 2 ]; then quiet=$((quiet + 1)); else quiet=0; fi
    t0=$t1
  done
  local after=$((SECONDS - opened))
  # 3. Sample: RSS and established client connections of the proxy, now.
  local rss conns
  rss=$(status_kib "$pid" VmRSS)
  [ "$rss" -gt "$peak" ] && peak=$rss
  conns=$(ss -Htn state established "( sport = :$port )" | wc -l)
  [ "$quiet" -ge 2 ] || echo "warning: proxy not idle ${after}s after the gate (size $size); raise hold" >&2
  while kill -0 "$load" 2>/dev/null; do
    sample_peak "$pid"
    sleep 0.2
  done
  wait "$load" || true
  local hwm ok
  hwm=$(status_kib "$pid" VmHWM)
  [ "$peak" -gt "$hwm" ] && hwm=$peak
  ok=$(awk '$1=="ok"{print $2}' "$tmp/load.$size")
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$rss $conns $hwm ${ok:-0} $after"
}

printf 'Proxy memory, %s concurrent sessions x one blob result each (3 data lines), --observe http,\n' "$sessions"
printf 'every stream paused mid-way through its last data line at the sample (gate %s, hold %ss)\n' "$sessions" "$hold"
read -r s_rss s_conns s_hwm s_ok s_after < <(run 65536)
read -r b_rss b_conns b_hwm b_ok b_after < <(run 4194304)
[ -n "${s_rss:-}" ] && [ -n "${b_rss:-}" ] || { echo "a run failed (see above)" >&2; exit 1; }
printf '%-14s %14s %18s %14s %10s\n' "event size" "RSS at hold" "conns at hold" "peak RSS" "calls ok"
printf '%-14s %10s KiB %18s %10s KiB %10s   (sampled %ss after the gate)\n' \
  "64 KiB" "$s_rss" "$s_conns" "$s_hwm" "$s_ok" "$s_after"
printf '%-14s %10s KiB %18s %10s KiB %10s   (sampled %ss after the gate)\n' \
  "4 MiB" "$b_rss" "$b_conns" "$b_hwm" "$b_ok" "$b_after"
printf 'ratio 4 MiB / 64 KiB: RSS at hold %.2fx, peak %.2fx  (goal <= 1.2)\n' \
  "$(echo "$b_rss $s_rss" | awk '{print $1/$2}')" "$(echo "$b_hwm $s_hwm" | awk '{print $1/$2}')"
