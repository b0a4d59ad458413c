#!/usr/bin/env bash
# The main job: install, build, and print the coverage tables (paper Tables 3-4) for a directory
# (default: the system libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
exec build/bin/ehelf stats "${@:-/usr/lib/x86_64-linux-gnu}"
