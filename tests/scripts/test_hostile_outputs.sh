#!/usr/bin/env bash
# Every command that writes a file, aimed at hostile output paths: a symbolic link to a file the
# user owns, a character device (a copy of /dev/null and /dev/full made with mknod when root, the
# real /dev/null otherwise), a FIFO, a directory and a path in a missing directory. The oracle is
# the file system itself (stat before and after): a link's target keeps its bytes and mode, a
# device, FIFO or directory stays what it was, nothing named .ehelf-* is left behind, each refusal
# is one line on stderr with a non-zero exit, and no output carries a setuid or setgid bit (a
# setuid input to `synth --patch` included). A character device is written into, as compilers do.
# Also: a setuid or setgid copy of ehelf refuses to run (run by nobody when root), and a hard
# RLIMIT_AS below compile's 4 GiB no longer fails the C compiler.
source "$(dirname "$0")/common.sh" "$@"
src=$2
cd "$work" || exit 1
umask 022

cat > prog.c <<'EOF'
#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int middle(int x) { return leaf(x) + leaf(x + 1); }
int main(int argc, char** argv) {
  /* "spin": long enough (about 0.3 s of CPU) for a sampling profiler to take samples. */
  long n = argc > 1 ? 30000000L : 1, sum = 0;
  for (long i = 0; i < n; ++i) sum += middle((int)i);
  printf("%ld\n", sum);
  return 0;
}
EOF
cc -O1 -g -o prog prog.c || { bad "cc prog.c"; exit 1; }

root=0
[ "$(id -u)" = 0 ] && root=1

# The recording ehelf perf reads: made by ehelf's own recorder is not possible (it keeps no
# perf.data), so perf record when it works here.
have_perf_data=0
if command -v perf >/dev/null &&
  perf record -q -e cpu-clock -F 999 -g -o perf.data -- ./prog spin >/dev/null 2>&1; then
  have_perf_data=1
fi
# ehelf record needs perf_event_open.
have_record=0
"$ehelf" record -q -o probe.folded -- true >/dev/null 2>&1 && have_record=1
rm -f probe.folded

# The commands, each with OUT standing for its output path.
commands=(
  "compile prog -o OUT"
  "synth prog -o OUT"
  "synth prog --patch OUT"
  "check --record OUT -- ./prog"
)
[ $have_record = 1 ] && commands+=("record -q -f folded -o OUT -- ./prog spin") # -f: the paths have no extension
[ $have_perf_data = 1 ] && commands+=("perf perf.data -o OUT")
[ $have_record = 1 ] || echo "SKIP record -o: perf_event_open refused here"
[ $have_perf_data = 1 ] || echo "SKIP perf -o: perf record does not work here"

run() { # COMMAND-WITH-OUT OUT: runs it with stdout and stderr kept, $rc set
  local cmd=${1//OUT/$2}
  # shellcheck disable=SC2086 # the command's words
  timeout 120 "$ehelf" $cmd >run.out 2>run.err </dev/null
  rc=$?
}
one_line() { [ "$(wc -l <run.err)" = 1 ] && grep -q '^ehelf: ' run.err; }
no_leftovers() { # DIR: no temporary of ehelf's left in it
  [ -z "$(find "$1" -maxdepth 1 -name '.ehelf-*' -print -quit)" ]
}
state() { stat -c '%F %a %s' "$1"; }

for cmd in "${commands[@]}"; do
  name=${cmd%% OUT*}
  name=${name%% -o}
  d="$work/out-${name//[^a-z]/_}"
  mkdir -p "$d"

  # A symbolic link to a file of ours: neither followed nor replaced.
  printf 'precious\n' >"$d/target"
  chmod 0600 "$d/target"
  ln -sf "$d/target" "$d/link"
  run "$cmd" "$d/link"
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && one_line && [ -L "$d/link" ] &&
    [ "$(cat "$d/target")" = precious ] && [ "$(stat -c %a "$d/target")" = 600 ] &&
    no_leftovers "$d"; then
    ok "$name: a symbolic link at the output is refused, its target untouched: $(cat run.err)"
  else
    bad "$name: symbolic link: rc=$rc, link $(state "$d/link"), target $(cat "$d/target") $(stat -c %a "$d/target"); $(head -3 run.err)"
  fi

  # A FIFO: refused at once (no hang waiting for a reader), still a FIFO.
  rm -f "$d/fifo"
  mkfifo "$d/fifo"
  run "$cmd" "$d/fifo"
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && one_line && [ -p "$d/fifo" ] && no_leftovers "$d"; then
    ok "$name: a FIFO at the output is refused: $(cat run.err)"
  else
    bad "$name: FIFO: rc=$rc, now $(state "$d/fifo"); $(head -3 run.err)"
  fi

  # A directory: refused, left empty.
  mkdir -p "$d/dir"
  run "$cmd" "$d/dir"
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && one_line && [ -d "$d/dir" ] &&
    [ -z "$(ls -A "$d/dir")" ] && no_leftovers "$d"; then
    ok "$name: a directory at the output is refused: $(cat run.err)"
  else
    bad "$name: directory: rc=$rc, now $(state "$d/dir"); $(head -3 run.err)"
  fi

  # A path in a missing directory: one line, nothing created.
  run "$cmd" "$d/missing/out"
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && one_line && [ ! -e "$d/missing" ]; then
    ok "$name: a missing directory is one line: $(cat run.err)"
  else
    bad "$name: missing directory: rc=$rc; $(head -3 run.err)"
  fi

  # Character devices are written into and stay devices. Root makes its own copies of /dev/null
  # and /dev/full, so that a regression cannot replace the machine's.
  if [ $root = 1 ]; then
    rm -f "$d/null" "$d/full"
    mknod -m 0666 "$d/null" c 1 3 && mknod -m 0666 "$d/full" c 1 7
    null=$d/null
  else
    null=/dev/null
  fi
  run "$cmd" "$null"
  if [ $rc -eq 0 ] && [ -c "$null" ] && [ "$(stat -c %t:%T "$null")" = 1:3 ] &&
    no_leftovers "$d" && no_leftovers "$(dirname "$null")"; then
    ok "$name: written into a character device ($null), which stays one"
  else
    bad "$name: character device $null: rc=$rc, now $(state "$null"); $(head -3 run.err)"
  fi
  if [ $root = 1 ]; then
    run "$cmd" "$d/full"
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && one_line && grep -q 'No space left' run.err &&
      [ -c "$d/full" ] && no_leftovers "$d"; then
      ok "$name: a full device is one line and stays a device: $(cat run.err)"
    else
      bad "$name: /dev/full copy: rc=$rc, now $(state "$d/full"); $(head -3 run.err)"
    fi
  fi

  # A regular file is replaced (a new inode: a hard link to the old one keeps the old bytes),
  # without setuid or setgid bits, with the umask's mode.
  printf 'old\n' >"$d/regular"
  ln -f "$d/regular" "$d/hardlink"
  run "$cmd" "$d/regular"
  mode=$(stat -c %a "$d/regular")
  if [ $rc -eq 0 ] && [ -f "$d/regular" ] && [ -s "$d/regular" ] &&
    [ "$(cat "$d/hardlink")" = old ] && [ $((8#$mode & 8#7000)) = 0 ] &&
    [ $((8#$mode & 8#022)) = 0 ] && no_leftovers "$d"; then
    ok "$name: a regular file is replaced (mode $mode), its other link keeps the old bytes"
  else
    bad "$name: regular file: rc=$rc, $(state "$d/regular"), hard link: $(head -c 20 "$d/hardlink"); $(head -3 run.err)"
  fi
done

# The cache: an entry's path that is a link, a FIFO or a directory is refused, not replaced.
id=$(build_id prog)
if [ -n "$id" ]; then
  mkdir -p cache && chmod 0700 cache
  entry="cache/$id.minimal.so"
  printf 'precious\n' >cache-target
  for kind in link fifo dir; do
    rm -rf "$entry"
    case $kind in
      link) ln -s "$work/cache-target" "$entry" ;;
      fifo) mkfifo "$entry" ;;
      dir) mkdir "$entry" ;;
    esac
    EHELF_CACHE="$work/cache" timeout 120 "$ehelf" compile --cache prog >run.out 2>run.err
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && one_line && [ "$(cat cache-target)" = precious ] &&
      { [ -L "$entry" ] || [ -p "$entry" ] || [ -d "$entry" ]; } && no_leftovers cache; then
      ok "compile --cache: a $kind at the entry's path is refused: $(cat run.err)"
    else
      bad "compile --cache: $kind: rc=$rc, now $(state "$entry"); $(head -3 run.err)"
    fi
  done
  rm -rf "$entry"
else
  bad "prog has no build id"
fi

# synth --patch of a setuid and setgid input: the patched copy runs, without those bits.
cp prog suid-prog && chmod 6755 suid-prog
"$ehelf" synth suid-prog --patch patched >/dev/null 2>run.err
mode=$(stat -c %a patched 2>/dev/null)
if [ -n "$mode" ] && [ $((8#$mode & 8#7000)) = 0 ] && [ "$mode" = 755 ] &&
  [ "$(./patched)" = "$(./prog)" ]; then
  ok "synth --patch of a 6755 input: a runnable 755 copy"
else
  bad "synth --patch of a 6755 input: mode ${mode:-none}; $(head -3 run.err)"
fi

# A setuid or setgid ehelf refuses to run, before anything else: run by nobody, it would run
# commands and write files as root.
if [ $root = 1 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  priv=$(mktemp -d)
  mkdir "$priv/root-only" && chmod 0700 "$priv/root-only"
  chmod 0755 "$priv" "$work"
  cp prog "$priv/prog" && chmod 0755 "$priv/prog"
  cp "$ehelf" "$priv/ehelf-suid" && chmod 4755 "$priv/ehelf-suid"
  cp "$ehelf" "$priv/ehelf-sgid" && chmod 2755 "$priv/ehelf-sgid"
  as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  for copy in ehelf-suid ehelf-sgid; do
    "${as_nobody[@]}" "$priv/$copy" synth "$priv/prog" -o "$priv/root-only/out" \
      >run.out 2>run.err
    rc=$?
    if [ $rc -ne 0 ] && one_line && grep -q 'setuid or setgid' run.err &&
      [ ! -e "$priv/root-only/out" ]; then
      ok "$copy run by nobody refuses to run: $(cat run.err)"
    else
      bad "$copy run by nobody: rc=$rc, $(ls "$priv/root-only"); $(head -3 run.err)"
    fi
  done
  # Run by root, the same copy's ids agree: it runs.
  if "$priv/ehelf-suid" synth "$priv/prog" -o "$priv/root-only/out" >/dev/null 2>run.err &&
    [ -s "$priv/root-only/out" ]; then
    ok "the setuid copy run by root (real and effective ids equal) runs"
  else
    bad "the setuid copy run by root: $(head -3 run.err)"
  fi
  rm -rf "$priv"
else
  echo "SKIP setuid refusal: needs root, setpriv and the user nobody"
fi

# compile under a hard RLIMIT_AS below its 4 GiB limit for the C compiler: the lower limit is
# used (the child's setrlimit used to fail and cc "failed" with an empty message).
(
  ulimit -v 3500000
  "$ehelf" compile prog -o limited.so >run.out 2>run.err
)
rc=$?
if [ $sanitized = 1 ]; then
  echo "SKIP compile under a hard RLIMIT_AS: a sanitizer build cannot start under ulimit -v"
elif [ $rc -eq 0 ] && readelf -d limited.so >/dev/null 2>&1; then
  ok "compile under a hard RLIMIT_AS of 3.5 GB: built"
else
  bad "compile under a hard RLIMIT_AS of 3.5 GB: rc=$rc $(head -3 run.err)"
fi
# A C compiler that cannot run: the message says why, never an empty "cc failed: ".
printf '#!/bin/sh\nexit 3\n' >silent-cc && chmod 0755 silent-cc
EHELF_CC="$work/silent-cc" "$ehelf" compile prog -o silent.so >run.out 2>run.err
rc=$?
if [ $rc -ne 0 ] && one_line && grep -q 'exit status 3' run.err && [ ! -e silent.so ]; then
  ok "a compiler that fails silently: $(cat run.err)"
else
  bad "a compiler that fails silently: rc=$rc $(head -3 run.err)"
fi
exit $fail
