#!/usr/bin/env bash
# Proxy throughput on SSE traffic: direct vs through tearline relaying bytes only
# (--observe bytes) vs through tearline parsing HTTP/SSE and auditing (--observe http).
# The lab server streams 4 MiB `blob` results (one SSE event over 3 data lines); the load
# client runs the same closed-loop calls against each target in one run. Goal: SSE-observing
# proxy >= 0.7x direct. Usage: bench/sse_mode.sh [calls] [sessions]
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-96}
sessions=${2:-4}
cargo build --release --quiet
bin=target/release/tearline
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

addr_of() { # file pattern → first 127.0.0.1:PORT in it, waiting up to 10 s
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
for mode in bytes http; do
  RUST_LOG=warn $bin proxy --listen 127.0.0.1:0 --upstream "$lab" --api off --observe $mode >"$tmp/$mode" 2>&1 &
  pids+=($!)
done
bytes=$(addr_of "$tmp/bytes")
http=$(addr_of "$tmp/http")

run() { # target → MB/s of verified 4 MiB results
  out=$($bin load --target "http://$1/mcp" --sessions "$sessions" --calls "$calls" --tool blob \
        --args '{"size":4194304}' --policy strict 2>/dev/null)
  ok=$(echo "$out" | awk '$1=="ok"{print $2}')
  secs=$(echo "$out" | awk '$1=="elapsed"{print $2}' | tr -d 's')
  echo "$ok $secs" | awk '{printf "%.0f", $1*4.194304/$2}'
}

printf 'SSE proxy throughput, %s calls x 4 MiB over %s sessions (best of 3, MB/s of verified results)\n' "$calls" "$sessions"
declare -A best
for round in 1 2 3; do
  for t in direct bytes http; do
    case $t in direct) a=$lab;; bytes) a=$bytes;; http) a=$http;; esac
    v=$(run "$a")
    [ "${best[$t]:-0}" -lt "$v" ] && best[$t]=$v
  done
done
d=${best[direct]}
printf '%-28s %8s MB/s\n' "direct" "$d"
printf '%-28s %8s MB/s  %.2fx direct\n' "proxy, --observe bytes" "${best[bytes]}" "$(echo "${best[bytes]} $d" | awk '{print $1/$2}')"
printf '%-28s %8s MB/s  %.2fx direct  (goal >= 0.70)\n' "proxy, --observe http" "${best[http]}" "$(echo "${best[http]} $d" | awk '{print $1/$2}')"
