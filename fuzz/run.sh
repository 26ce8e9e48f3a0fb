#!/usr/bin/env bash
# Runs every fuzz target for TIME seconds each (default 60), one after the other, at the lowest
# CPU priority. Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#   fuzz/run.sh 3600            # one hour per target
#   fuzz/run.sh 60 sse http1    # only these targets
# New inputs go to fuzz/work/<target>/ (not committed); the seeds in fuzz/corpus/<target>/ are
# read, never written. A crash leaves fuzz/artifacts/<target>/crash-*: fix the bug, add the
# input to fuzz/corpus/<target>/ and a regression test. Each target's log is fuzz/work/<target>.log.
set -euo pipefail
cd "$(dirname "$0")"
TIME="${1:-60}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(http1 sse profile control lab load llm)
fi
# Safe Rust (no `unsafe` in the targets' paths): no sanitizer makes each run several times faster.
SANITIZER="${SANITIZER:-none}"
nice -n 19 cargo +nightly fuzz build -O -s "$SANITIZER"
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "work/$t" "artifacts/$t"
  echo "== $t: ${TIME}s"
  if ! nice -n 19 cargo +nightly fuzz run -O -s "$SANITIZER" "$t" "work/$t" "corpus/$t" -- \
      -max_total_time="$TIME" -max_len=4096 -timeout=20 -rss_limit_mb=2048 \
      -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"work/$t.log" 2>&1; then
    echo "!! $t failed: see fuzz/work/$t.log and fuzz/artifacts/$t/"
    status=1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' "work/$t.log" || true
done
exit $status
