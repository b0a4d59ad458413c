#!/usr/bin/env bash
# Instructions per eh_elf step, before and after a change of the code generator: compiles the
# same library with two ehelf binaries (--before, and --after, default build/bin/ehelf), both
# register sets, and counts with callgrind the instructions of ehelf_unwind_local and
# ehelf_unwind_remote (lookup and body, and the deref callback for remote) over one step every
# 16 bytes of the library's code (bench/eh_elf_step/step_count.c). Also the eh_elfs' code and
# data sizes. Writes bench/results/eh_elf_step.json and .md.
#
# Usage: bench/run_eh_elf_step.sh --before OLD_EHELF [--after NEW_EHELF] [--library PATH]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
after="$repo/build/bin/ehelf"
before=""
library=/usr/lib/x86_64-linux-gnu/libc.so.6
command_line="bench/run_eh_elf_step.sh${*:+ $*}"
while [ $# -gt 0 ]; do
  case $1 in
    --before) before=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --library) library=$2; shift 2 ;;
    *) echo "run_eh_elf_step: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$before" ] || { echo "run_eh_elf_step: --before OLD_EHELF is required" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -I"$repo/include" "$repo/bench/eh_elf_step/step_count.c" -o "$work/step_count" -ldl

rows=()
for version in before after; do
  bin=$before
  [ "$version" = after ] && bin=$after
  for set in minimal callee-saved; do
    so="$work/$version-$set.so"
    "$bin" compile "$library" --registers "$set" -o "$so" > /dev/null
    section_size() { readelf -SW "$so" | sed 's/\[ */[/' | awk -v n="$1" '$2 == n {print $6}'; }
    text=$((16#$(section_size .text)))
    rodata=$((16#$(section_size .rodata)))
    for variant in local remote; do
      arg=""
      [ "$variant" = remote ] && arg=remote
      out=$(valgrind --tool=callgrind --toggle-collect="ehelf_unwind_$variant" \
        --callgrind-out-file="$work/cg.out" "$work/step_count" "$so" $arg 2> /dev/null)
      ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$work/cg.out")
      rows+=("{\"version\": \"$version\", \"set\": \"$set\", \"variant\": \"$variant\", \"text\": $text, \"rodata\": $rodata, \"instructions\": $ir, \"run\": $out}")
    done
  done
done
mkdir -p "$repo/bench/results"
printf '%s\n' "${rows[@]}" > "$work/rows.jsonl"
python3 -c '
import json, sys, datetime, platform
rows = [json.loads(l) for l in sys.stdin]
library, command = sys.argv[1], sys.argv[2]
out = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "library": library,
       "command": command, "machine": platform.platform(), "rows": rows}
json.dump(out, open(sys.argv[3], "w"), indent=2)
md = ["# Instructions per eh_elf step, before and after (`%s`)\n" % command,
      "- Date: %s; library: %s; machine: %s" % (out["date"], library, out["machine"]),
      "- One step every 16 bytes of the code (%d steps); callgrind, ehelf_unwind_* and everything it calls.\n" % rows[0]["run"]["steps"],
      "| set | variant | code before | code after | instr/step before | instr/step after | change |",
      "|---|---|---:|---:|---:|---:|---:|"]
by = {(r["version"], r["set"], r["variant"]): r for r in rows}
for s in ("minimal", "callee-saved"):
    for v in ("local", "remote"):
        b, a = by[("before", s, v)], by[("after", s, v)]
        ib, ia = b["instructions"] / b["run"]["steps"], a["instructions"] / a["run"]["steps"]
        md.append("| %s | %s | %.1f KiB | %.1f KiB | %.1f | %.1f | %+.1f %% |" % (
            s, v, b["text"] / 1024, a["text"] / 1024, ib, ia, 100 * (ia - ib) / ib))
open(sys.argv[4], "w").write("\n".join(md) + "\n")
print("\n".join(md))
' "$library" "$command_line" "$repo/bench/results/eh_elf_step.json" "$repo/bench/results/eh_elf_step.md" < "$work/rows.jsonl"
