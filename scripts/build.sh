#!/usr/bin/env bash
# Configures and builds one configuration: release (build/) or asan (build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh
kind=${1:-release}
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DEHELF_SANITIZE=ON -DEHELF_BENCH=OFF) ;;
  *) echo "usage: scripts/build.sh [release|asan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j2
