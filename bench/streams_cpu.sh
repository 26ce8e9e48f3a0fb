#!/usr/bin/env bash
# What limits many-stream throughput through tearline: CPU accounting of the whole pipeline.
#
# For N parallel iperf3 streams (default 8), direct and through tearline (`--observe bytes`,
# zero-copy; and the default observer), it prints the throughput and the CPU-seconds per GiB of
# every process that moves the bytes: the iperf3 client and server (their own accounting, from
# iperf3 -J: cpu_utilization_percent × duration) and the proxy (utime+stime from /proc). If the
# pipeline is CPU-bound (the cores are all busy), throughput through the proxy is at most
# direct × (direct CPU per GiB / proxied CPU per GiB): the script prints that bound beside the
# measured ratio. Per-process CPU is little disturbed by other load on the machine, unlike
# throughput itself; the machine's own busy share (all processes, /proc/stat) is printed too.
#
# Installs nothing; needs iperf3 and python3 (apt-get update && apt-get install -y iperf3).
# Usage: bench/streams_cpu.sh [streams=8] [seconds=6] [runs=3]
set -euo pipefail
cd "$(dirname "$0")/.."
streams=${1:-8}
secs=${2:-6}
runs=${3:-3}
for t in iperf3 python3; do
  command -v $t >/dev/null || { echo "needs $t (apt-get install -y iperf3 python3)" >&2; exit 2; }
done
[ -x target/release/tearline ] || cargo build --release --quiet --bin tearline
bin=$PWD/target/release/tearline
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }
cpu() { awk '{print $14+$15+$16+$17}' "/proc/$1/stat" 2>/dev/null || echo 0; }
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }

iperf_port=$(port)
iperf3 -s -B 127.0.0.1 -p "$iperf_port" >/dev/null 2>&1 & pids+=($!)
wait_port "$iperf_port"
declare -A tport tpid
tport[direct]=$iperf_port; tpid[direct]=
start() { # name, observe mode
  local p; p=$(port)
  "$bin" proxy --listen "127.0.0.1:$p" --upstream "127.0.0.1:$iperf_port" --api off \
    --observe "$2" >"$tmp/$1.log" 2>&1 & pids+=($!)
  tport[$1]=$p; tpid[$1]=$!
  wait_port "$p"
}
start bytes bytes
start http http
targets=(direct bytes http)

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $streams streams, $runs run(s) of ${secs}s"
printf '%-4s %-7s %7s %6s %10s %10s %10s %10s %8s %8s\n' run target GiB/s ratio client_s/G server_s/G proxy_s/G total_s/G bound machine
for run in $(seq "$runs"); do
  for t in "${targets[@]}"; do
    pid=${tpid[$t]}
    c0=$([ -n "$pid" ] && cpu "$pid" || echo 0)
    read -r b0 a0 < <(busy)
    iperf3 -c 127.0.0.1 -p "${tport[$t]}" -P "$streams" -t "$secs" -J >"$tmp/out.json" 2>/dev/null || true
    read -r b1 a1 < <(busy)
    c1=$([ -n "$pid" ] && cpu "$pid" || echo 0)
    read -r gib cli srv < <(python3 - "$tmp/out.json" "$secs" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); secs = float(sys.argv[2])
e = j["end"]["sum_received"]; c = j["end"]["cpu_utilization_percent"]
gib = e["bytes"] / 2**30
print("%.4f %.4f %.4f" % (gib / e["seconds"], c["host_total"] / 100 * e["seconds"], c["remote_total"] / 100 * e["seconds"]))
EOF
)
    moved=$(python3 -c "print($gib*$secs)")
    proxy=$(awk -v a="$c0" -v b="$c1" -v hz="$hz" 'BEGIN{print (b-a)/hz}')
    machine=$(awk -v b0="$b0" -v b1="$b1" -v a0="$a0" -v a1="$a1" 'BEGIN{printf "%.0f%%", 100*(b1-b0)/(a1-a0)}')
    line=$(python3 - "$t" "$gib" "$cli" "$srv" "$proxy" "$moved" "$tmp/direct.$run" <<'EOF'
import sys, os
t, gib, cli, srv, proxy, moved, base = sys.argv[1], *map(float, sys.argv[2:7]), sys.argv[7]
per = lambda x: x / moved if moved else float("nan")
total = per(cli + srv + proxy)
if t == "direct":
    open(base, "w").write("%f %f" % (gib, total))
dg, dt = map(float, open(base).read().split())
print("%7.2f %6.2f %10.3f %10.3f %10.3f %10.3f %8.2f" % (gib, gib / dg, per(cli), per(srv), per(proxy), total, dt / total))
EOF
)
    printf '%-4s %-7s %s %8s\n' "$run" "$t" "$line" "$machine"
  done
done
echo
echo "bound = direct total CPU-s per GiB / this target's: the ratio a CPU-bound pipeline allows."
echo "machine = share of all cores busy during the case (every process, from /proc/stat)."
