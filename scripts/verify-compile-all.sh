#!/usr/bin/env bash
# Compiles and verifies every ELF file with unwind tables under the given directories:
# `ehelf compile --verify` (the differential check against the interpreter at the first and last
# address of every range) with --jobs into a temporary cache. Prints "N of M compiled and
# verified" per register set, then each failure with its one-line reason (and the first
# mismatches, if the check disagreed).
#
# Usage: scripts/verify-compile-all.sh [--registers minimal|callee-saved|both] [--jobs N]
#          [--ehelf PATH] [--relocatable] [--keep] [DIR...]
#   DIR...         default: /usr/lib/x86_64-linux-gnu (recursively) and /usr/bin
#   --registers    register set(s) to compile (default minimal)
#   --jobs         parallel compiles (default 2)
#   --relocatable  also try relocatable objects (.o; their FDEs have no addresses yet)
#   --keep         keep the temporary cache and logs (their directory is printed)
# Exit status: 0 if everything compiled and verified, 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ehelf=""
for b in "$here/build/bin/ehelf" "$here"/build-*/bin/ehelf; do
  [ -x "$b" ] && { ehelf=$b; break; }
done
sets=(minimal)
jobs=2
relocatable=0
keep=0
dirs=()
while [ $# -gt 0 ]; do
  case $1 in
    --registers)
      case ${2:-} in
        minimal|callee-saved) sets=("$2") ;;
        both) sets=(minimal callee-saved) ;;
        *) echo "verify-compile-all: --registers takes minimal, callee-saved or both" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --jobs) jobs=${2:-}; shift 2 ;;
    --ehelf) ehelf=${2:-}; shift 2 ;;
    --relocatable) relocatable=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "verify-compile-all: unknown option $1" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -eq 0 ] && dirs=(/usr/lib/x86_64-linux-gnu /usr/bin)
[[ "$jobs" =~ ^[0-9]+$ ]] && [ "$jobs" -ge 1 ] || { echo "verify-compile-all: bad --jobs" >&2; exit 2; }
if [ -z "$ehelf" ] || [ ! -x "$ehelf" ]; then
  echo "verify-compile-all: no ehelf binary (build first, or pass --ehelf PATH)" >&2
  exit 2
fi
for d in "${dirs[@]}"; do
  [ -d "$d" ] || [ -f "$d" ] || { echo "verify-compile-all: $d: no such directory" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ehelf-verify-all.XXXXXX")
if [ $keep -eq 0 ]; then trap 'rm -rf "$work"' EXIT; else echo "keeping $work"; fi
export EHELF_CACHE="$work/cache"
mkdir -p "$EHELF_CACHE"

# ---- 1. The inputs: x86_64 ELF64 files with a non-empty .eh_frame or .debug_frame ----
# Symlinks are not followed (their targets are under the same trees); files with the same
# build-id (hard links, copies) are compiled once.
python3 - "$work" "$relocatable" "${dirs[@]}" <<'PY'
import os, struct, sys
work, relocatable, roots = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
inputs, noid, dups, skipped_rel, notables, elves = [], [], [], 0, 0, 0
seen = {}
def files():
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for d, subdirs, names in os.walk(root):
            subdirs.sort()
            for n in sorted(names):
                p = os.path.join(d, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    yield p
def scan(p):
    """(type, has_tables, build_id) of an x86_64 ELF64 file, or None."""
    try:
        with open(p, "rb") as f:
            h = f.read(64)
            if len(h) < 64 or h[:4] != b"\x7fELF" or h[4] != 2 or h[5] != 1:
                return None
            e_type, e_machine = struct.unpack_from("<HH", h, 16)
            if e_machine != 62:
                return None
            shoff = struct.unpack_from("<Q", h, 0x28)[0]
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", h, 0x3a)
            if shoff == 0 or shnum == 0 or shentsize != 64 or shstrndx >= shnum:
                return (e_type, False, b"")
            f.seek(shoff)
            sh = f.read(64 * shnum)
            if len(sh) < 64 * shnum:
                return (e_type, False, b"")
            hdr = lambda i: struct.unpack_from("<IIQQQQIIQQ", sh, 64 * i)
            strtab = hdr(shstrndx)
            f.seek(strtab[4])
            names = f.read(min(strtab[5], 1 << 20))
            tables, build_id = False, b""
            for i in range(shnum):
                name_off, typ, flags, addr, off, size = hdr(i)[:6]
                end = names.find(b"\0", name_off)
                name = names[name_off:end] if end >= 0 else b""
                if name in (b".eh_frame", b".debug_frame") and typ != 8 and size > 4:
                    tables = True
                if name == b".note.gnu.build-id" and typ == 7 and 16 < size < 4096:
                    f.seek(off)
                    note = f.read(size)
                    namesz, descsz = struct.unpack_from("<II", note, 0)
                    start = 12 + ((namesz + 3) & ~3)
                    build_id = note[start:start + descsz]
            return (e_type, tables, build_id)
    except (OSError, struct.error):
        return None
for p in files():
    r = scan(p)
    if r is None:
        continue
    elves += 1
    e_type, tables, build_id = r
    if not tables:
        notables += 1
        continue
    if e_type == 1 and not relocatable:
        skipped_rel += 1
        continue
    if not build_id:
        noid.append(p)
        continue
    if build_id in seen:
        dups.append((p, seen[build_id]))
        continue
    seen[build_id] = p
    inputs.append(p)
with open(os.path.join(work, "inputs"), "w") as f:
    f.writelines(p + "\n" for p in inputs)
with open(os.path.join(work, "noid"), "w") as f:
    f.writelines(p + "\n" for p in noid)
with open(os.path.join(work, "scan"), "w") as f:
    f.write(f"{elves} x86_64 ELF files: {len(inputs) + len(noid)} to compile "
            f"({len(noid)} without a build-id), {len(dups)} duplicates by build-id, "
            f"{notables} without unwind tables, {skipped_rel} relocatable objects skipped\n")
PY
[ -s "$work/scan" ] || { echo "verify-compile-all: scanning failed" >&2; exit 1; }
cat "$work/scan"

# ---- 2. Compile and verify, in chunks (a crash loses one chunk, which is then redone file by
# file to find the culprit) ----
# Runs ehelf on the files in $1 (one per line) for register set $2; appends one result line per
# file to $work/results.$2: "OK<TAB>file<TAB>summary" or "FAIL<TAB>file<TAB>reason".
run_chunk() {
  local list=$1 set=$2 tag=$3
  local -a files
  mapfile -t files <"$list"
  local json="$work/$tag.json" err="$work/$tag.err"
  timeout 3600 "$ehelf" compile --cache --registers "$set" --jobs "$jobs" --verify --json \
    "${files[@]}" >"$json" 2>"$err"
  local rc=$?
  python3 - "$json" "$err" "$rc" "$list" "$work/results.$set" <<'PY'
import json, sys
json_path, err_path, rc, list_path, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
files = [l.rstrip("\n") for l in open(list_path) if l.strip()]
err = open(err_path, errors="replace").read().splitlines()
out = open(out_path, "a")
try:
    reports = json.load(open(json_path))
except Exception:
    reports = None
if reports is None:
    # ehelf died (or printed no JSON): say so for every file; the caller retries one by one.
    why = f"ehelf exited with status {rc}" + (f" (signal {rc - 128})" if rc > 128 else "")
    tail = next((l for l in reversed(err) if l.strip()), "")
    for f in files:
        out.write(f"CRASH\t{f}\t{why}; last stderr line: {tail}\n")
    sys.exit(0)
done = {r["source"]: r for r in reports}
# stderr, in input order: "ehelf: ERROR" for each failed file, "FILE: verify: ..." followed by
# "  mismatch: ..." lines for each compiled one.
errors = [l[len("ehelf: "):] for l in err if l.startswith("ehelf: ")]
mismatch_lines, current = {}, None
for l in err:
    if ": verify: " in l and not l.startswith("ehelf: "):
        current = l.split(": verify: ")[0]
        mismatch_lines[current] = []
    elif l.startswith("  mismatch: ") and current is not None:
        mismatch_lines[current].append(l[len("  mismatch: "):])
failed = [f for f in files if f not in done]
for i, f in enumerate(failed):
    reason = errors[i] if i < len(errors) else f"no result (ehelf exit status {rc})"
    out.write(f"FAIL\t{f}\t{reason}\n")
for f in files:
    r = done.get(f)
    if r is None:
        continue
    v = r.get("verification") or {}
    if not v:
        out.write(f"FAIL\t{f}\tcompiled but not verified\n")
    elif v["mismatches"]:
        ms = mismatch_lines.get(f, [])
        out.write(f"FAIL\t{f}\tverify: {v['mismatches']} mismatches of {v['checks']} checks; "
                  f"first: {' | '.join(ms[:3])}\n")
    else:
        out.write(f"OK\t{f}\t{v['checks']} checks, {v['agreed']} agree, {v['both_failed']} both "
                  f"refuse, {v['fallbacks']} fallback; growth {r['growth']:.2f}\n")
PY
}

chunk_size=40
for set in "${sets[@]}"; do
  : >"$work/results.$set"
  rm -f "$work"/chunk.*
  split -l $chunk_size -d -a 4 "$work/inputs" "$work/chunk."
  total=$(wc -l <"$work/inputs")
  n=0
  for chunk in "$work"/chunk.*; do
    [ -e "$chunk" ] || continue
    n=$((n + $(wc -l <"$chunk")))
    [ -t 2 ] && printf '\r[%s] %d/%d files' "$set" "$n" "$total" >&2
    before=$(wc -l <"$work/results.$set")
    run_chunk "$chunk" "$set" "$(basename "$chunk").$set"
    if tail -n +$((before + 1)) "$work/results.$set" | grep '^CRASH' >/dev/null; then # (grep -q: SIGPIPE under pipefail)
      # Redo the chunk file by file.
      head -n "$before" "$work/results.$set" >"$work/results.tmp" && mv "$work/results.tmp" "$work/results.$set"
      while IFS= read -r f; do
        printf '%s\n' "$f" >"$work/one"
        run_chunk "$work/one" "$set" "one.$set"
      done <"$chunk"
    fi
  done
  # Files without a build-id cannot be cache entries: -o, one at a time.
  while IFS= read -r f; do
    [ -n "$f" ] || continue
    out="$work/noid.$(basename "$f").$set.so"
    if "$ehelf" compile -o "$out" --registers "$set" --verify --json "$f" >"$work/noid.json" 2>"$work/noid.err"; then
      echo -e "OK\t$f\t(no build-id) $(grep -o '[0-9]* mismatches' "$work/noid.err")" >>"$work/results.$set"
    else
      reason=$(grep -m1 '^ehelf: ' "$work/noid.err" | sed 's/^ehelf: //')
      [ -n "$reason" ] || reason="verify: $(grep -o 'verify: .*' "$work/noid.err" | head -1) $(grep -m1 'mismatch:' "$work/noid.err")"
      echo -e "FAIL\t$f\t$reason" >>"$work/results.$set"
    fi
    rm -f "$out"
  done <"$work/noid"
  [ -t 2 ] && printf '\r%60s\r' '' >&2
done

# ---- 3. Summary ----
status=0
for set in "${sets[@]}"; do
  r="$work/results.$set"
  m=$(wc -l <"$r")
  n=$(grep -c '^OK' "$r")
  echo "$set: $n of $m compiled and verified"
  if [ "$n" -ne "$m" ]; then
    status=1
    echo "$set: failures ($((m - n))):"
    grep -v '^OK' "$r" | cut -f2- | sed 's/\t/: /; s/^/  /'
  fi
done
exit $status
