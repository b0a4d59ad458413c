#!/usr/bin/env bash
# Bad input to `ehelf perf`: each case must exit non-zero (not by a signal: the sanitizer build
# aborts on any memory error), print exactly one line on stderr naming the file (and the offset,
# for malformed data), and nothing on stdout. Truncated and corrupted real recordings are made
# with perf when it can record here (else that part is skipped with a message).
# Usage: test_perf_cli_errors.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
ehelf="$build/bin/ehelf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# perf's build-id cache (perf record fills it, perf script and ehelf perf read it) private to
# this run, so that tests running side by side do not share ~/.debug (perf record crashes now and
# then in its build-id pass, "util/build-id.c:1010" and stack smashing, beside other recordings).
export PERF_BUILDID_DIR="$work/buildid-cache"
fail=0

expect_error() { # name, expected text (grep pattern), command...
  local name=$1 want=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  local lines
  lines=$(wc -l < "$work/err")
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -q -- "$want" "$work/err" || [ "$lines" -ne 1 ] ||
    [ -s "$work/out" ]; then
    echo "FAIL $name: rc=$rc, stdout $(wc -c < "$work/out") bytes, stderr ($lines lines):"
    cat "$work/err"
    fail=1
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

# Damaged but partly readable: read up to the damage, exit 0, one line on stderr saying where and
# why and how many samples came before it.
expect_salvage() { # name, expected text (grep pattern), command...
  local name=$1 want=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  if [ $rc -ne 0 ] || ! grep -q -- "$want.*; [1-9][0-9]* samples\? read before it" "$work/err" ||
    [ "$(wc -l < "$work/err")" -ne 1 ] || [ ! -s "$work/out" ]; then
    echo "FAIL $name: rc=$rc, stdout $(wc -c < "$work/out") bytes, stderr:"; cat "$work/err"
    fail=1
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

# Not perf.data at all.
expect_error missing "$work/nothing.data: No such file" "$ehelf" perf "$work/nothing.data"
expect_error missing-default "perf.data: No such file" bash -c "cd '$work' && '$ehelf' perf < /dev/null"
: > "$work/empty.data"
expect_error empty "$work/empty.data: offset 0x0: truncated perf.data header" \
  "$ehelf" perf "$work/empty.data"
printf 'hello world, not a perf.data file\n' > "$work/text.data"
expect_error not-perf "$work/text.data: offset 0x0: not a perf.data file" \
  "$ehelf" perf "$work/text.data"
expect_error directory "$work: not a regular file" "$ehelf" perf "$work"
printf '2ELIFREP\x68\0\0\0\0\0\0\0' > "$work/big-endian.data"
expect_error big-endian "$work/big-endian.data: offset 0x0: big-endian" \
  "$ehelf" perf -f folded "$work/big-endian.data"
printf 'PERFILE2\x10\0\0\0\0\0\0\0' > "$work/pipe-header-only.data"
expect_error pipe-header-only "$work/pipe-header-only.data: offset 0x0: no event attributes" \
  "$ehelf" perf -f json "$work/pipe-header-only.data"

# Bad flags: the format, the backend, an unknown option (nothing read, nothing printed).
expect_error bad-format "nonsense" "$ehelf" perf -f nonsense "$work/text.data"
expect_error bad-backend "nonsense" "$ehelf" perf --backend nonsense "$work/text.data"
expect_error bad-option "--no-such-flag" "$ehelf" perf --no-such-flag "$work/text.data"
expect_error bad-max-frames "max-frames\|-n" "$ehelf" perf -n lots "$work/text.data"

# Real recordings, cut and corrupted.
# The fixture built here without the build's sanitizer flags: a short run, small recordings.
recursion="$work/recursion"
cc -O2 "$src/tests/fixtures/recursion.c" -o "$recursion" || { echo "FAIL: cc"; exit 1; }
record=(perf record -q -e cpu-clock -c 100000 --call-graph dwarf,1024)
run=(sh -c 'exec "$0" 1500 > /dev/null' "$recursion")
if ! command -v perf > /dev/null ||
  ! "${record[@]}" -o "$work/rec.data" -- "${run[@]}" > /dev/null 2> "$work/record.log" ||
  ! "${record[@]}" -o - -- "${run[@]}" > "$work/pipe.data" 2>> "$work/record.log"; then
  echo "SKIP recordings: perf cannot record here ($(head -1 "$work/record.log" 2> /dev/null))"
  exit $fail
fi
# The whole recordings are fine.
for f in rec pipe; do
  "$ehelf" perf -f folded "$work/$f.data" > "$work/out" 2> "$work/err" ||
    { echo "FAIL $f.data: $(cat "$work/err")"; fail=1; }
  [ -s "$work/out" ] || { echo "FAIL $f.data: no stacks"; fail=1; }
done

python3 - "$work" << 'PY'
import struct, sys
w = sys.argv[1]
b = open(w + '/rec.data', 'rb').read()
data_offset, data_size = struct.unpack_from('<QQ', b, 40)
open(w + '/cut-header.data', 'wb').write(b[:60])
open(w + '/cut-data.data', 'wb').write(b[:data_offset + data_size // 2])
# The feature sections' table cut inside its first entry.
open(w + '/cut-features.data', 'wb').write(b[:data_offset + data_size + 8])
# The data section's records walked; the fourth one's size made 0, then the last one's made
# to run past the end of the data.
pos, offsets = data_offset, []
while pos < data_offset + data_size:
    offsets.append(pos)
    pos += struct.unpack_from('<H', b, pos + 6)[0]
z = bytearray(b)
struct.pack_into('<H', z, offsets[3] + 6, 0)
open(w + '/size-zero.data', 'wb').write(z)
open(w + '/size-zero.offset', 'w').write('%#x' % offsets[3])
r = bytearray(b)
last = offsets[-1]
struct.pack_into('<H', r, last + 6, min(0xffff, data_offset + data_size - last + 8))
open(w + '/short-data.data', 'wb').write(r)
open(w + '/short-data.offset', 'w').write('%#x' % last)
# The attribute section pointing past the end of the file.
a = bytearray(b)
struct.pack_into('<Q', a, 24, len(b) + 8)
open(w + '/attrs-outside.data', 'wb').write(a)
p = open(w + '/pipe.data', 'rb').read()
open(w + '/cut-pipe.data', 'wb').write(p[:len(p) // 2 + 3])
PY
expect_error cut-header "cut-header.data: offset 0x8: truncated perf.data header" \
  "$ehelf" perf "$work/cut-header.data"
expect_salvage cut-data "cut-data.data: offset 0x[0-9a-f]*: the file ends inside its data section" \
  "$ehelf" perf "$work/cut-data.data"
expect_error cut-features "cut-features.data: offset 0x[0-9a-f]*: feature [0-9]* has no section entry" \
  "$ehelf" perf -f svg "$work/cut-features.data"
expect_error size-zero "size-zero.data: offset $(cat "$work/size-zero.offset"): record of 0 bytes" \
  "$ehelf" perf "$work/size-zero.data"
expect_salvage short-data "short-data.data: offset $(cat "$work/short-data.offset"): record of" \
  "$ehelf" perf -f json "$work/short-data.data"
expect_error attrs-outside "attrs-outside.data: offset 0x18: attribute section" \
  "$ehelf" perf "$work/attrs-outside.data"
# A pipe-layout recording cut inside a record: read up to it, as a file cut so (and as perf
# script salvages it), whether named or coming on standard input.
# (The cut falls inside a record or inside its 8-byte header, depending on the recording.)
cut_why="\(record of [0-9]* bytes does not fit\|truncated record header\)"
expect_salvage cut-pipe "cut-pipe.data: offset 0x[0-9a-f]*: $cut_why" \
  "$ehelf" perf "$work/cut-pipe.data"
expect_salvage cut-pipe-stdin "<stdin>: offset 0x[0-9a-f]*: $cut_why" \
  bash -c "cat '$work/cut-pipe.data' | '$ehelf' perf -f folded"
# A compressed recording (perf record -z) whose first compressed record is not zstd data.
if "${record[@]}" -z -o "$work/zstd.data" -- "${run[@]}" > /dev/null 2>> "$work/record.log"; then
  python3 - "$work" << 'PY'
import struct, sys
w = sys.argv[1]
b = bytearray(open(w + '/zstd.data', 'rb').read())
data_offset, data_size = struct.unpack_from('<QQ', b, 40)
pos = data_offset
while pos < data_offset + data_size:
    kind, size = struct.unpack_from('<I', b, pos)[0], struct.unpack_from('<H', b, pos + 6)[0]
    if kind == 81:  # PERF_RECORD_COMPRESSED: its zstd magic garbled
        b[pos + 8:pos + 12] = b'junk'
        open(w + '/zstd-bad.offset', 'w').write('%#x' % pos)
        break
    pos += size
open(w + '/zstd-bad.data', 'wb').write(b)
PY
  if [ -s "$work/zstd-bad.offset" ]; then
    expect_error zstd-garbled "zstd-bad.data: offset $(cat "$work/zstd-bad.offset"): zstd" \
      "$ehelf" perf "$work/zstd-bad.data"
  else
    echo "FAIL zstd.data: no compressed record"
    fail=1
  fi
else
  echo "SKIP compressed recording: perf record -z failed here"
fi

# Truncations of both recordings (60 lengths each, from a few bytes to nearly all): an error with
# an offset, or (the pipe layout cut at a record's end) stacks; never a crash.
for f in rec pipe; do
  size=$(stat -c %s "$work/$f.data")
  for ((n = 3; n < size; n += size / 60 + 1)); do
    head -c $n "$work/$f.data" > "$work/cut.data"
    "$ehelf" perf -f folded "$work/cut.data" > "$work/out" 2> "$work/err"
    rc=$?
    if [ $rc -ge 128 ] || { [ $rc -ne 0 ] && ! grep -q "^ehelf: $work/cut.data: offset 0x" "$work/err"; } ||
      [ "$(wc -l < "$work/err")" -gt 1 ] || { [ $rc -ne 0 ] && [ -s "$work/out" ]; }; then
      echo "FAIL $f.data cut at $n bytes: rc=$rc: $(cat "$work/err")"
      fail=1
    fi
    # The pipe layout on standard input, read as it comes: the same stacks, the same line.
    if [ $f = pipe ]; then
      head -c $n "$work/$f.data" | "$ehelf" perf -f folded > "$work/out-stdin" 2> "$work/err-stdin"
      rc_stdin=$?
      if [ $rc_stdin -ne $rc ] || ! cmp -s "$work/out" "$work/out-stdin" ||
        [ "$(sed "s|$work/cut.data|<stdin>|" "$work/err")" != "$(cat "$work/err-stdin")" ]; then
        echo "FAIL pipe.data cut at $n bytes on stdin: rc=$rc_stdin (file: $rc): $(cat "$work/err-stdin")"
        fail=1
      fi
    fi
  done
done
[ $fail -eq 0 ] && echo "ok   truncations of both recordings"
exit $fail
