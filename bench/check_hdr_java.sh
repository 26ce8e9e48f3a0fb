#!/usr/bin/env bash
# Cross-checks tearline's .hlog and .hgrm against HdrHistogram's Java reference tools
# (Debian package libhdrhistogram-java): HistogramLogProcessor must read report.hlog, and for
# every tag its percentile rows (value, percentile, total count) and footer must equal the
# .hgrm tearline wrote; a log merged by `tearline report merge` must hold the summed counts.
#
# Usage: bench/check_hdr_java.sh [REPORT_DIR]   (default: the synthetic report, see report_demo)
set -euo pipefail
cd "$(dirname "$0")/.."
jar=/usr/share/java/hdrhistogram.jar
[[ -r "$jar" ]] || { echo "check_hdr_java: install libhdrhistogram-java" >&2; exit 2; }
command -v java >/dev/null || { echo "check_hdr_java: java not installed" >&2; exit 2; }

dir="${1:-}"
if [[ -z "$dir" ]]; then
  dir=target/report-demo
  cargo run -q --example report_demo "$dir" >/dev/null
fi
cargo build -q
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
process() { # LOG TAG OUT: Java's percentile distribution, values µs → ms like tearline's
  java -cp "$jar" org.HdrHistogram.HistogramLogProcessor -i "$1" -tag "$2" \
    -outputValueUnitRatio 1000 -o "$3" >/dev/null 2>&1
}
rows() { grep -v '^#' "$1" | awk 'NF>=3 && $1 != "Value" {printf "%s %.6f %s\n", $1, $2, $3}'; }

status=0
for hgrm in "$dir"/*.hgrm; do
  tag="$(basename "$hgrm" .hgrm)"
  process "$dir/report.hlog" "$tag" "$work/$tag"
  if [[ "$(rows "$hgrm" | wc -l)" -eq 0 ]]; then
    echo "same   $tag (empty)"
  elif diff <(rows "$work/$tag.hgrm") <(rows "$hgrm") >/dev/null &&
     diff <(grep '^#\[\(Mean\|Max\|Buckets\)' "$work/$tag.hgrm") <(grep '^#' "$hgrm") >/dev/null; then
    echo "same   $tag ($(rows "$hgrm" | wc -l) rows)"
  else
    echo "DIFFER $tag"; diff <(rows "$work/$tag.hgrm") <(rows "$hgrm") | head -5; status=1
  fi
done

./target/debug/tearline report merge "$dir/report.hlog" "$dir/report.hlog" -o "$work/all.hlog" >/dev/null
tag="$(basename "$(ls "$dir"/*.hgrm | head -1)" .hgrm)"
process "$work/all.hlog" "$tag" "$work/merged"
single="$(grep 'Total count' "$work/$tag.hgrm" | tr -dc '0-9 ' | awk '{print $NF}')"
merged="$(grep 'Total count' "$work/merged.hgrm" | tr -dc '0-9 ' | awk '{print $NF}')"
if [[ "$merged" -eq $((2 * single)) ]]; then
  echo "merged $tag: $merged = 2 x $single"
else
  echo "MERGE  $tag: $merged != 2 x $single"; status=1
fi
exit "$status"
