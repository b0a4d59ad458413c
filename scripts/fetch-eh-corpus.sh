#!/usr/bin/env bash
# Fetches the C++ test suites libehelf-eh is checked against (tests/scripts/test_eh_corpus.sh):
# Debian bookworm's source packages of yaml-cpp (its 980 gtest tests: parser and conversion
# errors are exceptions) and fmtlib (format_error thrown by its format and printf tests), each
# checked against the SHA-256 that Debian's Sources index gives. Usage: fetch-eh-corpus.sh DIR
# (DIR/yaml-cpp and DIR/fmt hold the unpacked sources). Exit 1 when they cannot be had.
set -euo pipefail
dir=$1
mkdir -p "$dir"
# name | pool path | file | sha256
sources=(
  "yaml-cpp|y/yaml-cpp|yaml-cpp_0.7.0+dfsg.orig.tar.xz|dc63708605404e0b963e0ca3a9619d1c8270eda2839603e6fa0384e5e51e5312"
  "fmt|f/fmtlib|fmtlib_9.1.0+ds1.orig.tar.gz|84ce1c2d0be3a9863935137969dcec6970125caac032f82474640bfc81463583"
)
# The pool as the machine's apt sources name it, then the snapshot the machine was made from.
mirrors=(http://deb.debian.org/debian http://snapshot.debian.org/archive/debian/20250520T000000Z)
for entry in "${sources[@]}"; do
  IFS='|' read -r name pool file sum <<< "$entry"
  [ -f "$dir/$name/.unpacked" ] && continue
  got=""
  for m in "${mirrors[@]}"; do
    if curl -sfL --max-time 120 -o "$dir/$file.part" "$m/pool/main/$pool/$file" &&
      echo "$sum  $dir/$file.part" | sha256sum -c --quiet - 2> /dev/null; then
      got=1
      break
    fi
  done
  [ -n "$got" ] || { echo "fetch-eh-corpus: cannot fetch $file with SHA-256 $sum" >&2; exit 1; }
  rm -rf "$dir/$name" && mkdir -p "$dir/$name"
  tar -xf "$dir/$file.part" -C "$dir/$name" --strip-components=1
  rm -f "$dir/$file.part"
  touch "$dir/$name/.unpacked"
done
