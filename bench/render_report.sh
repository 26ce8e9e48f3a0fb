#!/usr/bin/env bash
# Renders a report.html in headless Chromium to a PNG screenshot, to check by eye that the page
# (inline SVG charts, tables) renders offline with scripts disabled.
#
# Usage: bench/render_report.sh [REPORT_DIR] [OUT.png]
#   REPORT_DIR  a directory holding report.html (default: the synthetic report of the tests,
#               written by `cargo run --example report_demo` (bench/report_demo.rs) to target/report-demo)
#   OUT.png     default: REPORT_DIR/report.png (HEIGHT=px sets the window height, default 3600)
# Needs Debian's `chromium` package (apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${1:-}"
if [[ -z "$dir" ]]; then
  dir=target/report-demo
  cargo run -q --example report_demo "$dir" >/dev/null
fi
html="$(realpath "$dir/report.html")"
out="${2:-$dir/report.png}"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "render_report: chromium not installed (apt-get install -y chromium)" >&2
  exit 2
fi

# The page has no scripts (tests/report_files.rs checks it), so none can run. The profile dir is
# private and removed afterwards.
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$profile" \
  --window-size=1000,"${HEIGHT:-3600}" --screenshot="$(realpath -m "$out")" "file://$html" \
  2> >(grep -v -e 'dbus' -e 'Fontconfig' >&2 || true)
[[ -s "$out" ]] || { echo "render_report: no screenshot written" >&2; exit 1; }
echo "rendered $html -> $out"
