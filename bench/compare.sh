#!/usr/bin/env bash
# tearline against direct loopback and other TCP proxies, in one run:
#   iperf3 throughput with 1 and 8 streams, sockperf TCP ping-pong latency (p50/p99, one way),
#   proxy CPU per GiB moved (utime+stime of the proxy process, children included).
# Targets: direct; tearline --observe bytes (zero-copy by default); tearline default observer
# (HTTP/SSE, iperf3's stream is not HTTP so it goes opaque); tearline --observe bytes
# --no-splice (the copying path, i.e. the relay before zero-copy); haproxy (default tcp mode,
# and with `option splice-auto`); socat; and tearline --observe bytes on one runtime worker
# thread (TOKIO_WORKER_THREADS=1: the runtime-layout experiment). Ratios are against direct in the same run.
#
# It installs nothing. It uses iperf3 and sockperf (required), haproxy and socat (skipped when
# absent). On Debian/Ubuntu:  apt-get update && apt-get install -y iperf3 sockperf haproxy socat
#
# Usage: bench/compare.sh [runs=1] [seconds per case=4]
# Prints each run's table, then the median ratio of every figure over the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
secs=${2:-4}
for t in iperf3 sockperf python3; do
  command -v $t >/dev/null || { echo "needs $t (apt-get install -y iperf3 sockperf python3)" >&2; exit 2; }
done
[ -x target/release/tearline ] || cargo build --release --quiet --bin tearline
bin=$PWD/target/release/tearline
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }
addr_of() { # log file → first 127.0.0.1:PORT printed in it
  for _ in $(seq 100); do
    a=$(grep -o '127\.0\.0\.1:[0-9]*' "$1" | head -1 || true)
    [ -n "$a" ] && { echo "${a#127.0.0.1:}"; return; }
    sleep 0.1
  done
  echo "no address in $1" >&2; exit 1
}
cpu() { # pid → utime+stime+cutime+cstime in clock ticks
  awk '{print $14+$15+$16+$17}' "/proc/$1/stat" 2>/dev/null || echo 0
}

iperf_port=$(port); sock_port=$(port)
iperf3 -s -B 127.0.0.1 -p "$iperf_port" >/dev/null 2>&1 & pids+=($!)
sockperf server --tcp -i 127.0.0.1 -p "$sock_port" >/dev/null 2>&1 & pids+=($!)
wait_port "$iperf_port"; wait_port "$sock_port"

declare -A iport sport ppid
targets=(direct)
iport[direct]=$iperf_port; sport[direct]=$sock_port; ppid[direct]=

start_tearline() { # name, worker threads (or "" for tokio's default: one per core), extra args…
  local name=$1 workers=$2; shift 2
  # One process per target serving two proxies (to iperf3 and to sockperf) from a profile.
  cat >"$tmp/$name.toml" <<EOF
[[proxy]]
name = "iperf"
listen = "127.0.0.1:$(port)"
upstream = "127.0.0.1:$iperf_port"

[[proxy]]
name = "sockperf"
listen = "127.0.0.1:$(port)"
upstream = "127.0.0.1:$sock_port"
EOF
  env ${workers:+TOKIO_WORKER_THREADS=$workers} RUST_LOG=warn "$bin" proxy --profile "$tmp/$name.toml" --api off "$@" >"$tmp/$name.log" 2>&1 &
  pids+=($!); ppid[$name]=$!
  iport[$name]=$(grep -A2 'name = "iperf"' "$tmp/$name.toml" | sed -n 's/listen = "127.0.0.1:\([0-9]*\)"/\1/p')
  sport[$name]=$(grep -A2 'name = "sockperf"' "$tmp/$name.toml" | sed -n 's/listen = "127.0.0.1:\([0-9]*\)"/\1/p')
  wait_port "${iport[$name]}"; wait_port "${sport[$name]}"
  targets+=("$name")
}
start_tearline tearline-bytes "" --observe bytes
start_tearline tearline-http ""
start_tearline tearline-copy "" --observe bytes --no-splice
start_tearline tearline-1thread 1 --observe bytes

if command -v haproxy >/dev/null; then
  for mode in plain splice; do
    name=haproxy; opt=""
    [ $mode = splice ] && { name=haproxy-splice; opt="option splice-auto"; }
    ip=$(port); sp=$(port)
    cat >"$tmp/$name.cfg" <<EOF
global
  maxconn 4096
defaults
  mode tcp
  $opt
  timeout connect 5s
  timeout client 1m
  timeout server 1m
listen iperf
  bind 127.0.0.1:$ip
  server s 127.0.0.1:$iperf_port
listen sockperf
  bind 127.0.0.1:$sp
  server s 127.0.0.1:$sock_port
EOF
    haproxy -db -f "$tmp/$name.cfg" >"$tmp/$name.log" 2>&1 & pids+=($!); ppid[$name]=$!
    iport[$name]=$ip; sport[$name]=$sp
    wait_port "$ip"; wait_port "$sp"
    targets+=("$name")
  done
else
  echo "haproxy not found: skipped" >&2
fi
if command -v socat >/dev/null; then
  ip=$(port); sp=$(port)
  # One socat process per listener; CPU is summed over both (children included).
  socat TCP-LISTEN:"$ip",bind=127.0.0.1,fork,reuseaddr TCP:127.0.0.1:"$iperf_port" & pids+=($!); ppid[socat]=$!
  socat TCP-LISTEN:"$sp",bind=127.0.0.1,fork,reuseaddr TCP:127.0.0.1:"$sock_port" & pids+=($!)
  iport[socat]=$ip; sport[socat]=$sp
  wait_port "$ip"; wait_port "$sp"
  targets+=(socat)
else
  echo "socat not found: skipped" >&2
fi

hz=$(getconf CLK_TCK)
iperf() { # port streams → "Gbit/s GiB"
  iperf3 -c 127.0.0.1 -p "$1" -P "$2" -t "$secs" -J 2>/dev/null | python3 -c '
import json,sys
e=json.load(sys.stdin)["end"]["sum_received"]
print("%.3f %.4f" % (e["bits_per_second"]/1e9, e["bytes"]/2**30))'
}
pingpong() { # port → "p50 p99" (µs, one way as sockperf prints it)
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$1" -t "$secs" -m 64 2>&1 | awk '
    /percentile 50.000/ {p50=$NF} /percentile 99.000/ {p99=$NF} END {print p50, p99}'
}

results=$tmp/results   # run target metric value
: >"$results"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $runs run(s) of ${secs}s per case"
for run in $(seq "$runs"); do
  printf '\nrun %s (load %s)\n' "$run" "$(cut -d' ' -f1 /proc/loadavg)"
  printf '%-16s %9s %6s %9s %6s %8s %8s %8s %8s %9s\n' target 1s_Gbps ratio 8s_Gbps ratio p50_us add p99_us add cpu_s/GiB
  for t in "${targets[@]}"; do
    pid=${ppid[$t]}
    c0=$([ -n "$pid" ] && cpu "$pid" || echo 0)
    read -r g1 b1 < <(iperf "${iport[$t]}" 1)
    read -r g8 b8 < <(iperf "${iport[$t]}" 8)
    c1=$([ -n "$pid" ] && cpu "$pid" || echo 0)
    read -r p50 p99 < <(pingpong "${sport[$t]}")
    cpg=$(awk -v a="$c0" -v b="$c1" -v hz="$hz" -v g="$b1" -v h="$b8" 'BEGIN{ if (a==b && a==0) print "-"; else printf "%.3f", (b-a)/hz/(g+h) }')
    [ "$t" = direct ] && { d1=$g1; d8=$g8; d50=$p50; d99=$p99; }
    r1=$(awk -v a="$g1" -v b="$d1" 'BEGIN{printf "%.2f", a/b}')
    r8=$(awk -v a="$g8" -v b="$d8" 'BEGIN{printf "%.2f", a/b}')
    a50=$(awk -v a="$p50" -v b="$d50" 'BEGIN{printf "%+.1f", a-b}')
    a99=$(awk -v a="$p99" -v b="$d99" 'BEGIN{printf "%+.1f", a-b}')
    printf '%-16s %9s %6s %9s %6s %8s %8s %8s %8s %9s\n' "$t" "$g1" "$r1" "$g8" "$r8" "$p50" "$a50" "$p99" "$a99" "$cpg"
    printf '%s %s r1 %s\n%s %s r8 %s\n%s %s add50 %s\n%s %s add99 %s\n%s %s cpu %s\n' \
      "$run" "$t" "$r1" "$run" "$t" "$r8" "$run" "$t" "$a50" "$run" "$t" "$a99" "$run" "$t" "$cpg" >>"$results"
  done
done

printf '\nmedian over %s run(s): ratio 1 stream, ratio 8 streams, added p50/p99 µs, proxy CPU-s per GiB\n' "$runs"
python3 - "$results" "${targets[@]}" <<'EOF'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
targets = sys.argv[2:]
def med(t, m):
    v = [float(r[3]) for r in rows if r[1] == t and r[2] == m and r[3] != "-"]
    return statistics.median(v) if v else float("nan")
print("%-16s %7s %7s %8s %8s %9s" % ("target", "1s", "8s", "add p50", "add p99", "cpu/GiB"))
for t in targets:
    print("%-16s %7.2f %7.2f %+8.1f %+8.1f %9.3f" % (t, med(t, "r1"), med(t, "r8"), med(t, "add50"), med(t, "add99"), med(t, "cpu")))
EOF
