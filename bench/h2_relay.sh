#!/usr/bin/env bash
# HTTP/2 through tearline, against the same origin direct and through a reference h2 proxy, in
# one run. Load: h2load (nghttp2). Origin: nghttpd serving files (h2c, prior knowledge).
# Targets: direct; `tearline proxy --observe bytes`; `tearline proxy` observing (--observe
# http, the default: the byte pumps with the h2 observer); `tearline-relay`: observing, with a
# profile whose one fault is a stream-scope `sse_cut` that never fires (probability 0), which
# makes every h2 connection go through the frame-by-frame stream relay (src/proxy/h2/): its
# cost (the run stops unless the proxy logged that it relayed); nghttpx (h2c -> h2c); haproxy
# (`proto h2` on both sides). With TLS=1, the same over TLS: h2 negotiated by ALPN on both
# sides of tearline (--tls-cert + --upstream-tls; tearline-tls observing, tearline-relay-tls
# relaying) and of nghttpx. With H1=1, the big case over HTTP/1.1 too (h2load --h1 against an
# nginx origin serving the same files): direct-h1, tearline-h1-bytes, tearline-h1-http, so the
# per-byte cost of observing HTTP/1.1 and h2 is compared in one run.
#
# Cases (best of ROUNDS rounds, targets interleaved in each round; ratio against direct):
#   big    one BIG_MIB MiB stream on one connection   h2load -n1 -c1            MiB/s
#   multi  MULTI_N streams of MULTI_KIB KiB, 100 at once on one connection (-c1 -m100)
#                                                                               MiB/s, req/s
#   small  SMALL_N streams of 1 KiB on SMALL_C connections, 32 at once each    req/s
# A round whose h2load run did not succeed on every request counts as 0 and is reported.
#
# Usage: bench/h2_relay.sh
#   env: ROUNDS=3 BIG_MIB=1024 MULTI_N=4000 MULTI_KIB=256 SMALL_N=200000 SMALL_C=4 TLS=0 H1=0
#        TEARLINE_BIN=path (skip the release build) REFS="nghttpx haproxy"
# Needs h2load, nghttpd, nghttpx, haproxy, openssl (and nginx with H1=1): installed with apt-get
# when missing (root).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
BIG_MIB=${BIG_MIB:-1024}
MULTI_N=${MULTI_N:-4000}
MULTI_KIB=${MULTI_KIB:-256}
SMALL_N=${SMALL_N:-200000}
SMALL_C=${SMALL_C:-4}
TLS=${TLS:-0}
H1=${H1:-0}
REFS=${REFS:-nghttpx haproxy}

need() {
  local missing=()
  command -v h2load >/dev/null || missing+=(nghttp2-client)
  command -v nghttpd >/dev/null || missing+=(nghttp2-server)
  command -v nghttpx >/dev/null || missing+=(nghttp2-proxy)
  command -v haproxy >/dev/null || missing+=(haproxy)
  command -v openssl >/dev/null || missing+=(openssl)
  if [ "$H1" = 1 ]; then command -v nginx >/dev/null || missing+=(nginx-light); fi
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
    a=$(grep -so 'listening on 127\.0\.0\.1:[0-9]*' "$1" | head -1 | cut -d' ' -f3 || true)
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

# The stream relay carries h2 connections when the profile holds a stream-scope fault
# (src/proxy/h2/mod.rs, `wanted`); this one never fires (probability 0; the origin's files are
# not SSE either). The proxy logs "h2 stream relay" at debug for each relayed connection (a few
# per round): checked after the warm-up, so the relay, not the pumps, is what is measured.
cat >"$tmp/relay.toml" <<'EOF'
[[fault]]
name = "never-cut"
kind = "sse_cut"
at = "mid-value"
probability = 0.0
EOF
relay_log="warn,tearline::proxy::conn=debug"
RUST_LOG=$relay_log "$bin" proxy --listen 127.0.0.1:0 --upstream "127.0.0.1:$origin" --api off \
  --profile "$tmp/relay.toml" >"$tmp/tearline-relay.log" 2>&1 &
pids+=($!)
url[tearline-relay]="http://$(tearline_addr "$tmp/tearline-relay.log")"
targets+=(tearline-relay)
relayed=(tearline-relay)

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
  RUST_LOG=$relay_log "$bin" proxy --listen 127.0.0.1:0 --upstream "127.0.0.1:$tls_origin" \
    --api off --upstream-tls --upstream-ca "$tmp/cert.pem" \
    --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" --profile "$tmp/relay.toml" \
    >"$tmp/tearline-relay-tls.log" 2>&1 &
  pids+=($!)
  url[tearline-relay-tls]="https://$(tearline_addr "$tmp/tearline-relay-tls.log")"
  targets+=(tearline-relay-tls)
  relayed+=(tearline-relay-tls)
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

if [ "$H1" = 1 ]; then
  # HTTP/1.1: nginx serving the same files (sendfile, one process); h2load --h1, big case only.
  h1_origin=$(free_port)
  mkdir -p "$tmp/nginx"
  cat >"$tmp/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path $tmp/nginx;
    proxy_temp_path $tmp/nginx;
    fastcgi_temp_path $tmp/nginx;
    uwsgi_temp_path $tmp/nginx;
    scgi_temp_path $tmp/nginx;
    server { listen 127.0.0.1:$h1_origin; root $www; }
}
EOF
  nginx -c "$tmp/nginx.conf" >"$tmp/nginx.log" 2>&1 &
  pids+=($!)
  wait_port "$h1_origin"
  url[direct-h1]="http://127.0.0.1:$h1_origin"
  targets+=(direct-h1)
  for mode in bytes http; do
    RUST_LOG=warn "$bin" proxy --listen 127.0.0.1:0 --upstream "127.0.0.1:$h1_origin" \
      --api off --observe "$mode" >"$tmp/tearline-h1-$mode.log" 2>&1 &
    pids+=($!)
    url[tearline-h1-$mode]="http://$(tearline_addr "$tmp/tearline-h1-$mode.log")"
    targets+=("tearline-h1-$mode")
  done
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

h1() { [[ $1 == *-h1* ]]; } # target -> true for the HTTP/1.1 targets

for t in "${targets[@]}"; do # warm-up, and a check that every target answers over h2 (or h1)
  want=h2 flag=()
  if h1 "$t"; then want=http/1.1 flag=(--h1); fi
  out=$(h2load "${flag[@]}" -n 10 -c 1 -m 10 "${url[$t]}/small" 2>&1 || true)
  proto=$(echo "$out" | awk '/^Application protocol:/{print $3}')
  if ! echo "$out" | grep -q '^requests: 10 total.* 10 succeeded' || [[ $proto != "$want"* ]]; then
    echo "target $t (${url[$t]}) does not answer over $want (protocol: ${proto:-none}):" >&2
    echo "$out" >&2
    exit 1
  fi
done
for t in "${relayed[@]}"; do # the stream relay carried the warm-up's connection
  if ! grep -q 'h2 stream relay' "$tmp/$t.log"; then
    echo "target $t: no \"h2 stream relay\" in the proxy's log; the relay is not engaged:" >&2
    cat "$tmp/$t.log" >&2
    exit 1
  fi
done

for round in $(seq "$ROUNDS"); do
  for t in "${targets[@]}"; do
    if h1 "$t"; then
      keep big "$t" "$(measure --h1 -n 1 -c 1 -m 1 "${url[$t]}/big")"
      continue
    fi
    keep big "$t" "$(measure -n 1 -c 1 -m 1 "${url[$t]}/big")"
    keep multi "$t" "$(measure -n "$MULTI_N" -c 1 -m 100 "${url[$t]}/multi")"
    keep small "$t" "$(measure -n "$SMALL_N" -c "$SMALL_C" -m 32 "${url[$t]}/small")"
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else printf "-" }'; }

printf '\n%-18s %10s %7s   %12s %9s %7s   %9s %7s\n' target "big MiB/s" ratio "multi MiB/s" "req/s" ratio \
  "small r/s" ratio
for t in "${targets[@]}"; do
  base=direct
  [[ $t == *-tls ]] && base=direct-tls
  if h1 "$t"; then
    printf '%-18s %10s %7s   %12s %9s %7s   %9s %7s\n' "$t" "${best_mib[big/$t]:-0}" \
      "$(ratio "${best_mib[big/$t]:-0}" "${best_mib[big/direct-h1]:-0}")" - - - - -
    continue
  fi
  printf '%-18s %10s %7s   %12s %9s %7s   %9s %7s\n' "$t" \
    "${best_mib[big/$t]:-0}" "$(ratio "${best_mib[big/$t]:-0}" "${best_mib[big/$base]:-0}")" \
    "${best_mib[multi/$t]:-0}" "${best_rps[multi/$t]:-0}" \
    "$(ratio "${best_mib[multi/$t]:-0}" "${best_mib[multi/$base]:-0}")" \
    "${best_rps[small/$t]:-0}" "$(ratio "${best_rps[small/$t]:-0}" "${best_rps[small/$base]:-0}")"
done
printf '(ratios against direct%s%s; load average after: %s)\n' \
  "$([ "$TLS" = 1 ] && echo ', *-tls against direct-tls')" \
  "$([ "$H1" = 1 ] && echo ', *-h1 against direct-h1')" "$(cut -d' ' -f1-3 /proc/loadavg)"
