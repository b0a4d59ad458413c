#!/usr/bin/env bash
# Configures and builds one configuration: release (build/), asan (build-asan/) or tsan
# (build-tsan/: the ehelf binary only, for tests/scripts/threads_under_tsan.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache-env.sh
kind=${1:-release}
target=()
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DEHELF_SANITIZE=ON -DEHELF_BENCH=OFF) ;;
  tsan) dir=build-tsan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DEHELF_TSAN=ON -DEHELF_TESTS=OFF -DEHELF_BENCH=OFF)
        target=(--target ehelf) ;;
  *) echo "usage: scripts/build.sh [release|asan|tsan]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j2 "${target[@]}"
