#!/usr/bin/env bash
# HTTP/2 through tearline, against the same origin direct and through a reference h2 proxy, in
# one run. Load: h2load (nghttp2). Origin: nghttpd serving files (h2c, prior knowledge).
# Targets: direct; `tearline proxy --observe bytes`; `tearline proxy` observing (--observe
# http, the default: whatever the relay does with h2 on this commit); nghttpx (h2c -> h2c);
# haproxy (`proto h2` on both sides). With TLS=1, the same over TLS: h2 negotiated by ALPN on
# both sides of tearline (--tls-cert + --upstream-tls) and of nghttpx.
#
# Cases (best of ROUNDS rounds, targets interleaved in each round; ratio against direct):
#   big    one BIG_MIB MiB stream on one connection   h2load -n1 -c1            MiB/s
#   multi  MULTI_N streams of MULTI_KIB KiB, 100 at once on one connection (-c1 -m100)
#                                                                               MiB/s, req/s
#   small  SMALL_N streams of 1 KiB on SMALL_C connections, 32 at once each    req/s
# A round whose h2load run did not succeed on every request counts as 0 and is reported.
#
# Usage: bench/h2_relay.sh
#   env: ROUNDS=3 BIG_MIB=256 MULTI_N=1000 MULTI_KIB=256 SMALL_N=50000 SMALL_C=4 TLS=0
#        TEARLINE_BIN=path (skip the release build) REFS="nghttpx haproxy"
# Needs h2load, nghttpd, nghttpx, haproxy, openssl: installed with apt-get when missing (root).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
BIG_MIB=${BIG_MIB:-256}
MULTI_N=${MULTI_N:-1000}
MULTI_KIB=${MULTI_KIB:-256}
SMALL_N=${SMALL_N:-50000}
SMALL_C=${SMALL_C:-4}
TLS=${TLS:-0}
REFS=${REFS:-nghttpx haproxy}

need() {
  local missing=()
  command -v h2load >/dev/null || missing+=(nghttp2-client)
  command -v nghttpd >/dev/null || missing+=(nghttp2-server)
  command -v nghttpx >/dev/null || missing+=(nghttp2-proxy)
  command -v haproxy >/dev/null || missing+=(haproxy)
  command -v openssl >/dev/null || missing+=(openssl)
  [ ${#missing[@]} -eq 0 ] && return
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${missing[*]} (apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
}
need

if [ -z "${TEARLINE_BIN:-}" ]; then
  cargo build --release --quiet --bin tearline
  TEARLINE_BIN=target/release/tearline
fi
bin=$TEARLINE_BIN

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() { # port -> waits until something accepts on 127.0.0.1:port (10 s at most)
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  exit 1
}

tearline_addr() { # log file -> the address tearline printed it listens on (10 s at most)
  for _ in $(seq 100); do
    a=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$1" | head -1 | cut -d' ' -f3 || true)
    [ -n "$a" ] && { echo "$a"; return; }
    sleep 0.1
  done
  echo "tearline printed no address in $1:" >&2
  cat "$1" >&2
  exit 1
}

# --- the documents ---------------------------------------------------------------------------
www=$tmp/www
mkdir -p "$www"
head -c $((BIG_MIB * 1024 * 1024)) /dev/zero >"$www/big"
head -c $((MULTI_KIB * 1024)) /dev/zero >"$www/multi"
head -c 1024 /dev/zero >"$www/small"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" 2>/dev/null

# --- the origin --------------------------------------------------------------------------------
origin=$(free_port)
nghttpd --no-tls -a 127.0.0.1 -d "$www" "$origin" >"$tmp/nghttpd.log" 2>&1 &
pids+=($!)
wait_port "$origin"

declare -A url
url[direct]="http://127.0.0.1:$origin"
targets=(direct)

for mode in bytes http; do
  RUST_LOG=warn "$bin" proxy --listen 127.0.0.1:0 --upstream "127.0.0.1:$origin" --api off \
    --observe "$mode" >"$tmp/tearline-$mode.log" 2>&1 &
  pids+=($!)
  url[tearline-$mode]="http://$(tearline_addr "$tmp/tearline-$mode.log")"
  targets+=("tearline-$mode")
done

for ref in $REFS; do
  p=$(free_port)
  case $ref in
    nghttpx)
      # h2c front and back; a 16 MiB stream window toward the origin so flow control does not
      # bound its one-stream throughput (the default is 64 KiB).
      nghttpx --conf=/dev/null --frontend="127.0.0.1,$p;no-tls" \
        --backend="127.0.0.1,$origin;;proto=h2" --workers=1 \
        --backend-http2-window-size=16777215 --frontend-http2-window-size=16777215 \
        --frontend-http2-connection-window-size=16777215 \
        --errorlog-file="$tmp/nghttpx.err" >"$tmp/nghttpx.log" 2>&1 &
      ;;
    haproxy)
      cat >"$tmp/haproxy.cfg" <<EOF
global
    tune.h2.initial-window-size 16777215
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
frontend h2c
    bind 127.0.0.1:$p proto h2
    default_backend origin
backend origin
    server nghttpd 127.0.0.1:$origin proto h2
EOF
      haproxy -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
      ;;
    *) echo "unknown reference proxy: $ref (nghttpx, haproxy)" >&2; exit 1 ;;
  esac
  pids+=($!)
  wait_port "$p"
  url[$ref]="http://127.0.0.1:$p"
  targets+=("$ref")
done

if [ "$TLS" = 1 ]; then
  tls_origin=$(free_port)
  nghttpd -a 127.0.0.1 -d "$www" "$tls_origin" "$tmp/key.pem" "$tmp/cert.pem" \
    >"$tmp/nghttpd-tls.log" 2>&1 &
  pids+=($!)
  wait_port "$tls_origin"
  url[direct-tls]="https://127.0.0.1:$tls_origin"
  targets+=(direct-tls)
  RUST_LOG=warn "$bin" proxy --listen 127.0.0.1:0 --upstream "127.0.0.1:$tls_origin" \
    --api off --upstream-tls --upstream-ca "$tmp/cert.pem" \
    --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" >"$tmp/tearline-tls.log" 2>&1 &
  pids+=($!)
  url[tearline-tls]="https://$(tearline_addr "$tmp/tearline-tls.log")"
  targets+=(tearline-tls)
  p=$(free_port)
  nghttpx --conf=/dev/null --frontend="127.0.0.1,$p" \
    --backend="127.0.0.1,$tls_origin;;proto=h2;tls" --insecure --workers=1 \
    --backend-http2-window-size=16777215 --frontend-http2-window-size=16777215 \
    --frontend-http2-connection-window-size=16777215 \
    --errorlog-file="$tmp/nghttpx-tls.err" "$tmp/key.pem" "$tmp/cert.pem" \
    >"$tmp/nghttpx-tls.log" 2>&1 &
  pids+=($!)
  wait_port "$p"
  url[nghttpx-tls]="https://127.0.0.1:$p"
  targets+=(nghttpx-tls)
fi

# --- one h2load run ----------------------------------------------------------------------------
# h2load -> "MiB/s req/s" of the run, or "0 0" if any request did not succeed.
measure() {
  local out
  out=$(h2load "$@" 2>&1) || true
  local total ok
  total=$(echo "$out" | awk '/^requests:/{print $2}')
  ok=$(echo "$out" | awk '/^requests:/{for(i=1;i<=NF;i++) if($(i+1)=="succeeded,") print $i}')
  if [ -z "$total" ] || [ "$total" != "$ok" ]; then
    echo "h2load $*: ${ok:-0} of ${total:-?} requests succeeded" >&2
    echo "0 0"
    return
  fi
  # "finished in 1.05s, 0.95 req/s, 243.81MB/s" (h2load's units are powers of 1024)
  echo "$out" | awk '/^finished in/{
    rps=$4; rate=$6; v=rate+0; u=rate; gsub(/[0-9.]/, "", u);
    if (u ~ /^GB/) v*=1024; else if (u ~ /^KB/) v/=1024; else if (u ~ /^B/) v/=1048576;
    printf "%.1f %.0f\n", v, rps }'
}

declare -A best_mib best_rps
keep() { # case target "mib rps"
  local m r
  read -r m r <<<"$3"
  awk -v a="$m" -v b="${best_mib[$1/$2]:-0}" 'BEGIN{exit !(a>b)}' && best_mib[$1/$2]=$m
  awk -v a="$r" -v b="${best_rps[$1/$2]:-0}" 'BEGIN{exit !(a>b)}' && best_rps[$1/$2]=$r
  true
}

printf 'tearline h2 relay bench: %s, commit %s, %s cores, load average %s\n' \
  "$(date -u +%FT%TZ)" "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" "$(nproc)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'origin nghttpd (h2c); big %s MiB x1; multi %s x %s KiB, -c1 -m100; small %s x 1 KiB, -c%s -m32; best of %s\n' \
  "$BIG_MIB" "$MULTI_N" "$MULTI_KIB" "$SMALL_N" "$SMALL_C" "$ROUNDS"

for t in "${targets[@]}"; do # warm-up, and a check that every target answers over h2
  out=$(h2load -n 10 -c 1 -m 10 "${url[$t]}/small" 2>&1 || true)
  proto=$(echo "$out" | awk '/^Application protocol:/{print $3}')
  if ! echo "$out" | grep -q '^requests: 10 total.* 10 succeeded' || [[ $proto != h2* ]]; then
    echo "target $t (${url[$t]}) does not answer over h2 (protocol: ${proto:-none}):" >&2
    echo "$out" >&2
    exit 1
  fi
done

for round in $(seq "$ROUNDS"); do
  for t in "${targets[@]}"; do
    keep big "$t" "$(measure -n 1 -c 1 -m 1 "${url[$t]}/big")"
    keep multi "$t" "$(measure -n "$MULTI_N" -c 1 -m 100 "${url[$t]}/multi")"
    keep small "$t" "$(measure -n "$SMALL_N" -c "$SMALL_C" -m 32 "${url[$t]}/small")"
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else printf "-" }'; }

printf '\n%-16s %12s %7s   %12s %9s %7s   %9s %7s\n' target "big MiB/s" ratio "multi MiB/s" "req/s" ratio \
  "small r/s" ratio
for t in "${targets[@]}"; do
  base=direct
  [[ $t == *-tls ]] && base=direct-tls
  printf '%-16s %12s %7s   %12s %9s %7s   %9s %7s\n' "$t" \
    "${best_mib[big/$t]:-0}" "$(ratio "${best_mib[big/$t]:-0}" "${best_mib[big/$base]:-0}")" \
    "${best_mib[multi/$t]:-0}" "${best_rps[multi/$t]:-0}" \
    "$(ratio "${best_mib[multi/$t]:-0}" "${best_mib[multi/$base]:-0}")" \
    "${best_rps[small/$t]:-0}" "$(ratio "${best_rps[small/$t]:-0}" "${best_rps[small/$base]:-0}")"
done
printf '(ratios against direct%s; load average after: %s)\n' \
  "$([ "$TLS" = 1 ] && echo ', *-tls against direct-tls')" "$(cut -d' ' -f1-3 /proc/loadavg)"
