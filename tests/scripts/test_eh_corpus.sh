#!/usr/bin/env bash
# libehelf-eh under test suites no one here wrote: Debian's yaml-cpp 0.7.0 (980 gtest tests;
# malformed YAML and bad conversions throw) and fmtlib 9.1.0 (format-test and printf-test:
# format_error thrown over a thousand times), fetched by scripts/fetch-eh-corpus.sh, built here
# with g++ -O2 against the system's GoogleTest, and run as built (libgcc_s) and with libehelf-eh
# preloaded: the same tests must pass, with the same exit status, and ours must have done the
# throwing (EHELF_EH_STATS: raises, none handed to libgcc_s). The sources and the built suites
# are kept in the build directory (eh-corpus/) for later runs.
source "$(dirname "$0")/common.sh" "$@"
lib="$(cd "$build" && pwd)/lib/libehelf-eh.so.0"
[ -f "$lib" ] || { echo "SKIP no $lib (target ehelf_eh not built)"; exit 77; }
corpus="$(cd "$build" && pwd)/eh-corpus"
if ! bash "$2/scripts/fetch-eh-corpus.sh" "$corpus"; then
  echo "SKIP the test suites' sources cannot be fetched (no network to deb.debian.org?)"
  exit 77
fi
pre=""
if grep -q libasan <<<"$(readelf -d "$lib")"; then
  pre="$(g++ -print-file-name=libasan.so)"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

# compile_all OUT_DIR FLAGS... -- SOURCES...: objects, two compilers at a time.
compile_all() {
  local out=$1; shift
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  mkdir -p "$out"
  printf '%s\n' "$@" | xargs -P2 -I{} sh -c \
    'o="$0/$(echo "{}" | tr / _).o"; [ -f "$o" ] && exit 0; g++ "$@" -c "{}" -o "$o.tmp" && mv "$o.tmp" "$o"' \
    "$out" "${flags[@]}"
}

y="$corpus/yaml-cpp"
if [ ! -x "$corpus/yaml-tests" ]; then
  (cd "$y" && compile_all "$corpus/yaml-obj" -O2 -w -std=c++11 -Iinclude -Isrc -Itest \
    -Itest/integration -- src/*.cpp src/contrib/*.cpp test/*.cpp test/integration/*.cpp \
    test/node/*.cpp) &&
    g++ "$corpus"/yaml-obj/*.o -o "$corpus/yaml-tests" -lgmock -lgtest -pthread ||
    { bad "building yaml-cpp's tests"; exit 1; }
fi
f="$corpus/fmt"
if [ ! -x "$corpus/fmt-format-test" ]; then
  common=(src/format.cc src/os.cc test/gtest-extra.cc test/util.cc test/test-main.cc)
  (cd "$f" && compile_all "$corpus/fmt-obj" -O2 -w -std=c++17 -Iinclude -Itest -- \
    "${common[@]}" test/format-test.cc test/printf-test.cc) || { bad "building fmt's tests"; exit 1; }
  objs=()
  for c in "${common[@]}"; do objs+=("$corpus/fmt-obj/$(echo "$c" | tr / _).o"); done
  for t in format-test printf-test; do
    g++ "${objs[@]}" "$corpus/fmt-obj/test_$t.cc.o" -o "$corpus/fmt-$t" -lgmock -lgtest -pthread ||
      { bad "linking fmt's $t"; exit 1; }
  done
fi

# What a gtest run says of each test, without times; the summary's counts.
verdicts() { sed -n 's/^\[ *\(OK\|FAILED\|SKIPPED\) *\] \([^ ]*\).*/\1 \2/p; s/^\[ *\(PASSED\|FAILED\) *\] \([0-9]* tests\?\).*/\1 \2/p' "$1"; }
for suite in yaml-tests fmt-format-test fmt-printf-test; do
  prog="$corpus/$suite"
  args=()
  # Under AddressSanitizer's runtime, fmt's test of a failed allocation (it asks for 2^63 bytes
  # and expects std::bad_alloc) ends in the runtime's abort instead: left out, in both runs.
  [ -n "$pre" ] && [ $suite = fmt-format-test ] && args=(--gtest_filter=-util_test.format_system_error)
  # fmt's tests write into the working directory (files for its file tests).
  (cd "$work" && LD_PRELOAD="$pre" "$prog" "${args[@]}" > "$work/ref.txt" 2>&1); rc_ref=$?
  (cd "$work" && EHELF_EH_STATS=1 LD_PRELOAD="$pre${pre:+ }$lib" "$prog" "${args[@]}" \
    > "$work/ours.txt" 2>&1)
  rc_ours=$?
  stats=$(grep '^ehelf-eh: ' "$work/ours.txt" | tail -1)
  n=$(verdicts "$work/ref.txt" | grep -c '^OK ')
  if [ $rc_ref != 0 ]; then
    bad "$suite fails as built (exit $rc_ref): $(grep -m3 FAILED "$work/ref.txt")"
  elif [ $rc_ours != $rc_ref ]; then
    bad "$suite: exit $rc_ours with libehelf-eh, $rc_ref without"
    grep -m5 'FAILED\|terminate\|Abort' "$work/ours.txt"
  elif ! diff <(verdicts "$work/ref.txt") <(verdicts "$work/ours.txt") > "$work/diff"; then
    bad "$suite: the tests' verdicts differ"; head -10 "$work/diff"
  elif ! grep -qE '^ehelf-eh: [1-9][0-9]* raise.* 0 handed to libgcc' <<< "$stats"; then
    bad "$suite: ours did not do the throwing ($stats)"
  else
    ok "$suite: the same $n tests pass; ${stats#ehelf-eh: }"
  fi
done
exit $fail
