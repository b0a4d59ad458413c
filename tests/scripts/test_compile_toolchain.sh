#!/usr/bin/env bash
# How `ehelf compile` writes and runs the C compiler: 4 concurrent `compile --cache` of one library
# while a reader copies the entry in a loop (every copy is the old object or the new one, never a
# partial one); symbolic links planted at the temporary names older versions used are not
# followed; no temporary is left after a failing compiler or a full disk (RLIMIT_FSIZE); the
# compiler runs under CPU-time and memory limits in its own process group, and killing ehelf
# kills the compiler and everything it started.
# Usage: test_compile_toolchain.sh BUILD_DIR [SOURCE_DIR]
source "$(dirname "$0")/common.sh" "$@"
export EHELF_CACHE="$work/cache"
lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libz.so.1)
id=$(build_id "$lib")
entry="$EHELF_CACHE/$id.minimal.so"
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

# ---- the old and the new object, both genuine and different ----
"$ehelf" compile "$lib" -o "$work/old.so" --opt=-O0 || { echo "FAIL compile -O0"; exit 1; }
"$ehelf" compile "$lib" -o "$work/new.so" || { echo "FAIL compile"; exit 1; }
"$ehelf" compile "$lib" -o "$work/new2.so" || { echo "FAIL compile"; exit 1; }
cmp -s "$work/new.so" "$work/new2.so" && ok "compiles are reproducible (byte-identical)" \
  || bad "two compiles of $lib differ"
cmp -s "$work/old.so" "$work/new.so" && bad "-O0 and -O1 objects are identical"

# ---- 4 concurrent compiles into the cache, a reader copying the entry meanwhile ----
mkdir -m 0700 "$EHELF_CACHE" && cp "$work/old.so" "$entry"
: >"$work/stop"
(
  reads=0 torn=0
  while [ -e "$work/stop" ]; do
    cp "$entry" "$work/snap" 2>/dev/null || continue
    reads=$((reads + 1))
    cmp -s "$work/snap" "$work/old.so" || cmp -s "$work/snap" "$work/new.so" || torn=$((torn + 1))
  done
  echo "$reads $torn" >"$work/reader"
) &
reader=$!
pids=()
for i in 1 2 3 4; do
  "$ehelf" compile --cache "$lib" 2>"$work/err.$i" &
  pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
rm -f "$work/stop"
wait "$reader"
read -r reads torn <"$work/reader"
if [ "${rcs[*]}" = "0 0 0 0" ] && cmp -s "$entry" "$work/new.so" && [ "$torn" = 0 ] && [ "$reads" -gt 0 ]
then
  ok "4 concurrent compiles: all succeeded; $reads reads, each the old or the new object"
else
  bad "4 concurrent compiles: exit codes ${rcs[*]}, $torn of $reads reads torn: $(cat "$work"/err.*)"
fi
left=$(ls -A "$EHELF_CACHE" | grep -v "^$id.minimal.so\$")
[ -z "$left" ] && ok "no temporaries left in the cache" || bad "left in the cache: $left"

# ---- symbolic links planted at the names older versions used (<entry>.tmp<PID>[.c|.log]) ----
echo precious >"$work/victim"
sh -c 'for s in "" .c .log; do ln -s "$1" "$2.tmp$$$s"; done; exec "$3" compile --cache "$4"' \
  sh "$work/victim" "$entry" "$ehelf" "$lib" 2>"$work/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(cat "$work/victim")" = precious ] && cmp -s "$entry" "$work/new.so"; then
  ok "planted symbolic links: not followed, the victim is intact"
else
  bad "planted symbolic links: rc=$rc, victim now $(head -c 80 "$work/victim" | tr -c '[:print:]' '?')"
fi
find "$EHELF_CACHE" -name "*.tmp*" -type l -delete

# ---- failures leave nothing behind ----
mkdir "$work/out"
expect_clean_failure() { # label, expected message (grep pattern), command...
  local label=$1 want=$2
  shift 2
  "$@" >/dev/null 2>"$work/err"
  local rc=$? lines
  lines=$(wc -l <"$work/err")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && grep -q -e "$want" "$work/err" \
     && [ -z "$(ls -A "$work/out")" ]; then
    ok "$label: rc=$rc, nothing left: $(cat "$work/err")"
  else
    bad "$label: rc=$rc, $lines lines: $(head -c 300 "$work/err"); left: $(ls -A "$work/out")"
  fi
}
expect_clean_failure "failing compiler" "false failed" "$ehelf" compile "$lib" -o "$work/out/z.so" --cc false
expect_clean_failure "missing compiler" "cannot find the C compiler" \
  "$ehelf" compile "$lib" -o "$work/out/z.so" --cc "$work/nonexistent-cc"
expect_clean_failure "full disk (RLIMIT_FSIZE)" "cannot write" \
  bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' sh "$ehelf" compile "$lib" -o "$work/out/z.so"

# ---- the compiler's limits and process group ----
cat >"$work/limits-cc" <<'SH'
#!/bin/bash
echo "cpu=$(ulimit -t) as=$(ulimit -v) pgid=$(ps -o pgid= -p $$ | tr -d ' ')"
exit 3
SH
chmod +x "$work/limits-cc"
"$ehelf" compile "$lib" -o "$work/out/z.so" --cc "$work/limits-cc" 2>"$work/err"
mine=$(ps -o pgid= -p $$ | tr -d ' ')
if grep -q "cpu=300 as=4194304 pgid=" "$work/err" && ! grep -q "pgid=$mine\$" "$work/err"; then
  ok "compiler limits: $(sed 's/.*failed: //' "$work/err") (ehelf's group is $mine)"
else
  bad "compiler limits: $(cat "$work/err") (ehelf's group is $mine)"
fi

# ---- killing ehelf kills the compiler and its children ----
cat >"$work/slow-cc" <<SH
#!/bin/bash
echo \$\$ >"$work/cc.pid.tmp"
sleep 300 &
echo \$! >>"$work/cc.pid.tmp"
mv "$work/cc.pid.tmp" "$work/cc.pid"
wait
SH
chmod +x "$work/slow-cc"
# (ehelf killed by SIGKILL cannot remove its scratch directory: it goes to its own place.)
mkdir "$work/killed"
"$ehelf" compile "$lib" -o "$work/killed/z.so" --cc "$work/slow-cc" 2>/dev/null &
victim=$!
for _ in $(seq 100); do [ -s "$work/cc.pid" ] && break; sleep 0.1; done
if [ ! -s "$work/cc.pid" ]; then
  bad "the slow compiler did not start"
else
  mapfile -t cc_pids <"$work/cc.pid"
  kill -9 "$victim"
  wait "$victim" 2>/dev/null
  for _ in $(seq 50); do
    alive "${cc_pids[0]}" || alive "${cc_pids[1]}" || break
    sleep 0.1
  done
  if alive "${cc_pids[0]}" || alive "${cc_pids[1]}"; then
    bad "kill -9 ehelf: compiler ${cc_pids[0]} or its child ${cc_pids[1]} still runs"
    kill -9 "${cc_pids[@]}" 2>/dev/null
  else
    ok "kill -9 ehelf: the compiler and its child died with it"
  fi
fi
# ---- a crafted table over the bound on bodies is refused, with exit code 3 ----
{
  printf '.text\n.globl f\n.type f,@function\nf:\n.cfi_startproc\n'
  for ((i = 0; i < 20000; i++)); do printf 'nop\n.cfi_def_cfa_offset %d\n' $((16 + 8 * i)); done
  printf 'ret\n.cfi_endproc\n'
} >"$work/rows.S"
if cc -shared -nostdlib -Wl,--build-id -o "$work/rows.so" "$work/rows.S"; then
  # (timeout: a hang fails instead of blocking; how fast the refusal is is no test's business)
  timeout 300 "$ehelf" compile "$work/rows.so" -o "$work/out/rows.eh.so" 2>"$work/err"
  rc=$?
  if [ $rc -eq 3 ] && [ "$(wc -l <"$work/err")" -eq 1 ] \
     && grep -q "rows.so: too large to compile: more than 8192 distinct row bodies; the table backend unwinds it" "$work/err" \
     && [ -z "$(ls -A "$work/out")" ]; then
    ok "20000 distinct rows: refused, rc=3: $(cat "$work/err")"
  else
    bad "20000 distinct rows: rc=$rc (124: it hung): $(head -c 300 "$work/err"); left: $(ls -A "$work/out")"
  fi
  # With another, compilable input: that one is compiled, the exit code still says 3.
  "$ehelf" compile --cache "$work/rows.so" "$lib" 2>"$work/err"
  rc=$?
  [ $rc -eq 3 ] && [ -s "$entry" ] && ok "mixed inputs: rc=3, the compilable one compiled" \
    || bad "mixed inputs: rc=$rc $(cat "$work/err")"
else
  bad "cannot build the crafted table"
fi
exit $fail
