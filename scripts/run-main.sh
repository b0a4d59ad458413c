#!/usr/bin/env bash
# The main job: install, build, and profile a program with `ehelf record`, which unwinds each
# sample as it is taken: by default the built-in workload (demo/demo_workload.cpp: C, C++ and
# library frames, two threads), else the command given (bash scripts/run-main.sh CMD ARGS...).
# Writes an interactive flame graph and prints the summary and the file's path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
if [ $# -gt 0 ]; then
  out=ehelf-record.svg
  set -- "$@"
else
  out=ehelf-demo.svg
  set -- build/bin/ehelf-demo
fi
build/bin/ehelf record -o "$out" -- "$@"
echo "open $(pwd)/$out in a browser: hover names a frame, a click zooms, Ctrl-F searches"
