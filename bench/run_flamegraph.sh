#!/usr/bin/env bash
# ehelf's flame-graph SVG in headless Chromium: page load and click-zoom times of generated deep
# graphs (10,000 and 80,000 frames, 375 levels; flame and icicle layouts). Writes
# bench/results/flamegraph.{json,md}. Arguments go to bench/flamegraph/flamegraph_browser.py
# (--frames 80000, --runs 5).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
source bench/common/prepare.sh
bench_prepare ehelf bench_flamegraph_svg
/usr/bin/python3 bench/flamegraph/flamegraph_browser.py --writer build/bin/bench_flamegraph_svg \
  --ehelf build/bin/ehelf --json bench/results/flamegraph.json --md bench/results/flamegraph.md "$@"
cat bench/results/flamegraph.md
