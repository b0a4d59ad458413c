#!/usr/bin/env bash
# `ehelf dump` on a file truncated while it is mapped: no SIGBUS, one line naming the file, exit
# code 1. Deterministic: ehelf writes into a FIFO nobody reads, so it blocks mid-dump (the output
# is megabytes, the pipe holds 64 KiB); the copy is truncated then, and the FIFO drained.
# Usage: test_truncated_input.sh BUILD_DIR [SOURCE_DIR]
source "$(dirname "$0")/common.sh" "$@"

for size in 0 65536; do
  copy="$work/libc-$size.so"
  cp "$(readlink -f /usr/lib/x86_64-linux-gnu/libc.so.6)" "$copy"
  rm -f "$work/pipe" && mkfifo "$work/pipe"
  "$ehelf" dump "$copy" >"$work/pipe" 2>"$work/err" &
  pid=$!
  exec 3<"$work/pipe"
  head -c 100 <&3 >/dev/null # ehelf has started writing; the pipe fills again behind it
  # Blocked in write(2) on the full pipe: mid-dump.
  wait_blocked "$pid" "$ehelf" 1 || bad "dump to $size bytes: ehelf did not block writing"
  truncate -s "$size" "$copy"
  bytes=$(cat <&3 | wc -c)
  exec 3<&-
  wait "$pid"
  rc=$?
  want="ehelf: $copy: the file was truncated while being read (it changed on disk)"
  if [ $rc -eq 1 ] && [ "$(cat "$work/err")" = "$want" ]; then
    ok "dump truncated to $size bytes mid-dump: rc=1, $(cat "$work/err") ($bytes bytes written)"
  else
    bad "dump truncated to $size bytes mid-dump: rc=$rc, stderr: $(head -c 300 "$work/err")"
  fi
done
exit $fail
