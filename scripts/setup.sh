#!/usr/bin/env bash
# Installs every Debian package ehelf needs to build, test, fuzz and benchmark.
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config g++ clang libclang-rt-14-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev libzstd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  binutils python3 time ccache curl xz-utils
  libunwind-dev libdw-dev valgrind strace libc6-dbg
  elfutils gdb linux-perf
  sqlite3
  libzydis-dev
  csmith libcsmith-dev cvise
  libprotobuf-dev python3-protobuf
  chromium chromium-driver python3-selenium
  libbpf-dev bpftool llvm
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}"
fi
