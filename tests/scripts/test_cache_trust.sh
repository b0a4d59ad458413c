#!/usr/bin/env bash
# The eh_elf cache is trusted only when safe: `ehelf stack --backend=auto` on a sleeping process
# uses a genuine libc eh_elf from $EHELF_CACHE, and refuses, with one line on stderr and before
# any of its code runs, every hostile entry under the same name: a constructor, a destructor, an
# IFUNC resolver, an extra DT_NEEDED, a symbol interposing malloc, an executable stack, a
# truncated file, a symbolic link to a genuine object, a FIFO, a group-writable file, a file owned
# by someone else, a world-writable cache directory. The stack is then unwound from the tables
# and is the same as with --backend=table. A privileged (AT_SECURE) process and one without HOME,
# XDG_CACHE_HOME or EHELF_CACHE use no cache at all.
# Usage: test_cache_trust.sh BUILD_DIR [SOURCE_DIR]
source "$(dirname "$0")/common.sh" "$@"
cache="$work/cache"
export EHELF_CACHE="$cache"
mkdir -m 0755 "$cache"

libc=$(readlink -f /usr/lib/x86_64-linux-gnu/libc.so.6)
id=$(build_id "$libc")
[ -n "$id" ] || { echo "FAIL no build-id in $libc"; exit 1; }
entry="$cache/$id.minimal.so"
if ! "$ehelf" compile "$libc" -o "$work/good.so" --keep-source 2>"$work/err"; then
  echo "FAIL compile $libc:"; cat "$work/err"; exit 1
fi

# The flags ehelf's toolchain uses, so each hostile object differs from the genuine one only by
# what the test adds.
cflags=(-O1 -fPIC -shared -nostdlib -fvisibility=hidden -fno-plt -w -Wl,-z,noexecstack
        -Wl,--hash-style=gnu -Wl,-O1)
# exit_group(N) with no libc: if hostile code runs, ehelf exits with N.
exit_with() { echo "__asm__ volatile(\"mov \$231, %eax; mov \$$1, %edi; syscall\");"; }
hostile() { # name, extra C, extra flags...
  local name=$1 extra=$2
  shift 2
  { cat "$work/good.so.c"; printf '%s\n' "$extra"; } >"$work/$name.c"
  cc "${cflags[@]}" "$@" -o "$work/$name.so" "$work/$name.c" 2>"$work/cc.err" \
    || { bad "cannot build the hostile object $name: $(head -3 "$work/cc.err")"; return 1; }
}
hostile ctor "__attribute__((constructor)) static void ehelf_hostile(void) { $(exit_with 42) }"
hostile dtor "__attribute__((destructor)) static void ehelf_hostile(void) { $(exit_with 43) }"
hostile ifunc "static void* ehelf_resolve(void) { $(exit_with 44) return 0; }
void ehelf_hostile(void) __attribute__((ifunc(\"ehelf_resolve\")));
__attribute__((visibility(\"default\"))) void (*const ehelf_hostile_ptr)(void) = ehelf_hostile;"
hostile needed "" -Wl,--no-as-needed "$(readlink -f /usr/lib/x86_64-linux-gnu/libz.so.1)"
hostile malloc "__attribute__((visibility(\"default\"))) void* malloc(unsigned long n) {
  (void)n; $(exit_with 45) return 0; }"
hostile execstack "" -Wl,-z,execstack
head -c "$(($(stat -c %s "$work/good.so") / 2))" "$work/good.so" >"$work/truncated.so"

sleep 600 &
target_pid=$!
wait_blocked "$target_pid" "$(command -v sleep)" || { echo "FAIL: sleep 600 did not start"; exit 1; }

# Runs ehelf stack on the target; $rc, $work/out, $work/err.
stack() {
  timeout 60 "$ehelf" stack -p "$target_pid" -m -v "$@" >"$work/out" 2>"$work/err"
  rc=$?
}
stack --backend=table
[ $rc -eq 0 ] || { echo "FAIL --backend=table: rc=$rc"; cat "$work/err"; exit 1; }
grep -v stopped "$work/out" >"$work/table.frames"

stack --backend=auto
if [ $rc -eq 0 ] && [ ! -s "$work/err" ] && ! grep -q compiled "$work/out"; then
  ok "empty cache: tables only, silent"
else
  bad "empty cache: rc=$rc $(cat "$work/err")"
fi
cp "$work/good.so" "$entry"
stack --backend=auto
if [ $rc -eq 0 ] && [ ! -s "$work/err" ] && grep -q "unwound by compiled" "$work/out"; then
  ok "genuine entry: $(grep stopped "$work/out" | head -1 | sed 's/^ *//')"
else
  bad "genuine entry not used: rc=$rc $(cat "$work/err") $(grep stopped "$work/out")"
fi
grep -v stopped "$work/out" | diff -q - "$work/table.frames" >/dev/null \
  || bad "genuine entry: frames differ from --backend=table"

# Expects the current cache state to be refused: one line naming why, tables used, same frames.
expect_refused() { # label, expected reason (grep pattern)
  local label=$1 want=$2
  stack --backend=auto
  local problems=()
  [ $rc -eq 0 ] || problems+=("rc=$rc")
  [ "$(wc -l <"$work/err")" -eq 1 ] || problems+=("$(wc -l <"$work/err") lines on stderr")
  grep -q "refusing.*$want.*unwinding with the tables" "$work/err" || problems+=("message")
  grep -q compiled "$work/out" && problems+=("compiled code was used")
  grep -v stopped "$work/out" | diff -q - "$work/table.frames" >/dev/null \
    || problems+=("frames differ from --backend=table")
  if [ ${#problems[@]} -eq 0 ]; then
    ok "$label: $(cat "$work/err")"
  else
    bad "$label: ${problems[*]}: $(head -c 400 "$work/err")"
  fi
}
place() { rm -f "$entry"; cp "$1" "$entry"; chmod 0644 "$entry"; }

for h in ctor:DT_INIT_ARRAY dtor:DT_FINI_ARRAY ifunc:relocation needed:DT_NEEDED \
         malloc:"exports symbol malloc" execstack:"executable stack" truncated:"truncated\|past the end\|outside"; do
  name=${h%%:*}
  [ -f "$work/$name.so" ] || continue
  place "$work/$name.so"
  expect_refused "$name" "${h#*:}"
done

rm -f "$entry"; ln -s "$work/good.so" "$entry"
expect_refused "symbolic link to a genuine object" "symbolic link"
rm -f "$entry"; mkfifo "$entry"
expect_refused "FIFO" "not a regular file"
place "$work/good.so"; chmod 0664 "$entry"
expect_refused "group-writable entry" "writable by group or others"
if [ "$(id -u)" = 0 ]; then
  place "$work/good.so"; chown nobody "$entry"
  expect_refused "entry owned by nobody" "owned by uid"
fi
place "$work/good.so"; chmod 0777 "$cache"
expect_refused "world-writable cache directory" "the eh_elf cache.*writable by group or others"
chmod 0755 "$cache"
# A directory above the cache that others may write to (not sticky): refused; sticky (as /tmp):
# accepted. `ehelf compile --cache` refuses to fill such a cache.
mkdir -m 0777 "$work/open" && mv "$cache" "$work/open/cache"
chmod 0777 "$work/open"
EHELF_CACHE="$work/open/cache" expect_refused "world-writable parent directory" \
  "its parent $work/open is writable by group or others"
EHELF_CACHE="$work/open/cache" "$ehelf" compile --cache "$work/good.so" >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 1 ] && grep -q "cannot use this eh_elf cache.*its parent $work/open is writable" "$work/err" \
  && ok "compile --cache under a world-writable parent: rc=1, $(cat "$work/err")" \
  || bad "compile --cache under a world-writable parent: rc=$rc $(cat "$work/err")"
chmod 1777 "$work/open"
EHELF_CACHE="$work/open/cache" stack --backend=auto
grep -q "unwound by compiled" "$work/out" && [ ! -s "$work/err" ] \
  && ok "sticky world-writable parent (as /tmp): cache used" \
  || bad "sticky parent: $(cat "$work/err")"
mv "$work/open/cache" "$cache"

# No cache without a safe place for it: no HOME, XDG_CACHE_HOME or EHELF_CACHE (never /tmp), and
# a relative XDG_CACHE_HOME/HOME is ignored.
run_env() { env -u EHELF_CACHE -u HOME -u XDG_CACHE_HOME "$@" timeout 60 "$ehelf" stack -p \
  "$target_pid" -m -v --backend=auto >"$work/out" 2>"$work/err"; rc=$?; }
mkdir -p "$work/home/.cache" && mv "$cache" "$work/home/.cache/ehelf"
run_env HOME="$work/home"
grep -q "unwound by compiled" "$work/out" && ok "HOME/.cache/ehelf is the default cache" \
  || bad "HOME/.cache/ehelf not used: $(cat "$work/err")"
mkdir -p "$work/xdg" && mv "$work/home/.cache/ehelf" "$work/xdg/ehelf"
run_env HOME="$work/home" XDG_CACHE_HOME="$work/xdg"
grep -q "unwound by compiled" "$work/out" && ok "XDG_CACHE_HOME/ehelf comes before HOME" \
  || bad "XDG_CACHE_HOME/ehelf not used: $(cat "$work/err")"
(cd "$work" && env -u EHELF_CACHE -u HOME XDG_CACHE_HOME=xdg timeout 60 "$ehelf" stack \
  -p "$target_pid" -m -v --backend=auto >"$work/out" 2>"$work/err")
grep -q compiled "$work/out" && bad "a relative XDG_CACHE_HOME was used" \
  || ok "a relative XDG_CACHE_HOME is ignored"
run_env
if [ $rc -eq 0 ] && ! grep -q compiled "$work/out" && [ ! -s "$work/err" ]; then
  ok "no HOME, XDG_CACHE_HOME or EHELF_CACHE: no cache"
else
  bad "no HOME: rc=$rc $(cat "$work/err")"
fi

# A copy of ehelf given a file capability (cap_sys_ptrace, what attaching to others' processes
# needs) and run by nobody is privileged (AT_SECURE), as a setuid one would be, which ehelf
# refuses to be (tests/scripts/test_hostile_outputs.sh): EHELF_CACHE is ignored and no cache is
# used. Run by root, the same copy uses the cache.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v setcap >/dev/null; then
  capable=$(mktemp -d)
  # Readable by nobody, so that only the privilege check can keep the cache out.
  chmod 0755 "$capable" "$work" "$work/xdg"
  cp "$ehelf" "$capable/ehelf"
  if setcap cap_sys_ptrace+ep "$capable/ehelf" 2>/dev/null; then
    as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    "${as_nobody[@]}" sleep 600 &
    nobody_pid=$!
    wait_blocked "$nobody_pid" "$(command -v sleep)" || bad "sleep 600 as nobody did not start"
    EHELF_CACHE="$work/xdg/ehelf" "$capable/ehelf" stack -p "$nobody_pid" -m -v >"$work/out" 2>&1
    grep -q "unwound by compiled" "$work/out" || bad "capable copy run by root: cache not used"
    "${as_nobody[@]}" env EHELF_CACHE="$work/xdg/ehelf" HOME="$work/home" \
      XDG_CACHE_HOME="$work/xdg" "$capable/ehelf" stack -p "$nobody_pid" -m -v >"$work/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "unwound by table" "$work/out" && ! grep -q compiled "$work/out"
    then
      ok "ehelf with cap_sys_ptrace run by nobody: environment ignored, tables only"
    else
      bad "ehelf with cap_sys_ptrace run by nobody: rc=$rc $(tail -3 "$work/out")"
    fi
    kill "$nobody_pid" 2>/dev/null
  else
    echo "SKIP file capabilities: setcap refused here (no extended attributes?)"
  fi
  rm -rf "$capable"
fi
exit $fail
