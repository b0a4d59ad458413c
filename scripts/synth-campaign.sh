#!/usr/bin/env bash
# The paper's synthesis experiment, larger: N csmith programs, each compiled by gcc and
# clang at -O0 -fomit-frame-pointer, -O1, -O2, -O3 and -Os; .eh_frame and .eh_frame_hdr removed
# with objcopy; the tables synthesized from the stripped binary and compared at every analysed
# instruction with the compiler's own (`ehelf synth STRIPPED --compare-with ORIGINAL`). Prints one
# line per setup (programs, programs at 100%, instructions agreeing) and the disagreements by
# category, and keeps every program that disagrees under OUT/failures.
#
# Usage: scripts/synth-campaign.sh [--ehelf PATH] [--seed FIRST] [--no-symbols] N [OUT]
#        scripts/synth-campaign.sh --summary OUT   (the table of a run so far, even interrupted)
#   N      programs per setup (100 for the campaign in docs/design/synthesizer.md)
#   OUT    kept work directory (default: a temporary one, removed at the end)
#   --no-symbols  strip the symbols too (objcopy --strip-all): functions are then found from
#                 the entry point, calls and address-taken code only
# Exit status: 0 if every program of every setup agrees at 100%, 1 otherwise, 2 on a setup error.
# Run it niced on a shared machine: nice scripts/synth-campaign.sh 20
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ehelf-binary.sh"
first_seed=1
strip_all=""
summary_only=""
while [ $# -gt 0 ]; do
  case $1 in
    --ehelf) ehelf=${2:-}; shift 2 ;;
    --seed) first_seed=${2:-1}; shift 2 ;;
    --no-symbols) strip_all=--strip-all; shift ;;
    --summary) summary_only=${2:-}; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
if [ -n "$summary_only" ]; then
  results="$summary_only/results.jsonl"
  [ -f "$results" ] || { echo "synth-campaign: no $results" >&2; exit 2; }
else
  count=${1:-}
  [[ "$count" =~ ^[0-9]+$ ]] || { echo "synth-campaign: usage: $0 [--ehelf PATH] [--seed FIRST] N [OUT]" >&2; exit 2; }
  [ -n "$ehelf" ] && [ -x "$ehelf" ] || { echo "synth-campaign: no ehelf binary (build first)" >&2; exit 2; }
  command -v csmith >/dev/null || { echo "synth-campaign: csmith not installed (scripts/setup.sh)" >&2; exit 2; }
  csmith_include=$(dirname "$(find /usr/include -name csmith.h -print -quit 2>/dev/null)")
  [ -n "$csmith_include" ] || { echo "synth-campaign: csmith.h not found (libcsmith-dev)" >&2; exit 2; }
  if [ $# -ge 2 ]; then
    out=$2
    mkdir -p "$out"
  else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
  fi
  mkdir -p "$out/src" "$out/bin" "$out/failures"
  setups=("-O0 -fomit-frame-pointer" "-O1" "-O2" "-O3" "-Os")
  results="$out/results.jsonl"
  : >"$results"

  for ((i = 0; i < count; i++)); do
    seed=$((first_seed + i))
    prog="$out/src/p$seed.c"
    csmith --seed "$seed" >"$prog" 2>/dev/null || { echo "synth-campaign: csmith --seed $seed failed" >&2; continue; }
    for cc in gcc clang; do
      for flags in "${setups[@]}"; do
        setup="$cc ${flags}"
        bin="$out/bin/p$seed-$cc${flags// /}"
        "$cc" $flags -w -I"$csmith_include" -o "$bin" "$prog" 2>/dev/null ||
          { echo "{\"setup\":\"$setup\",\"seed\":$seed,\"error\":\"does not build\"}" >>"$results"; continue; }
        objcopy $strip_all --remove-section .eh_frame --remove-section .eh_frame_hdr "$bin" "$bin.stripped"
        "$ehelf" synth "$bin.stripped" --compare-with "$bin" --json --max-print 20 >"$bin.json" 2>"$bin.err"
        status=$?
        if [ "$status" -ge 2 ] || ! [ -s "$bin.json" ]; then
          echo "{\"setup\":\"$setup\",\"seed\":$seed,\"error\":\"exit $status: $(head -c 200 "$bin.err" | tr -d '"\\')\"}" >>"$results"
          continue
        fi
        python3 - "$setup" "$seed" "$bin.json" >>"$results" <<'PY'
import json, sys
d = json.load(open(sys.argv[3]))
print(json.dumps({"setup": sys.argv[1], "seed": int(sys.argv[2]), "compared": d["compared"],
                  "agreeing": d["agreeing"], "categories": d["categories"],
                  "conflicts": d["conflicts"], "failed_functions": d["functions_failed"],
                  "missed": d.get("missed_instructions", 0),
                  "disagreements": d["disagreements"][:3]}))
PY
        if [ "$status" = 1 ]; then
          cp "$prog" "$bin" "$bin.json" "$out/failures/" 2>/dev/null
        else
          rm -f "$bin" "$bin.stripped" "$bin.json" "$bin.err"
        fi
      done
    done
  done

fi
python3 - "$results" <<'PY'
import json, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
order = []
by = defaultdict(lambda: {"programs": 0, "perfect": 0, "compared": 0, "agreeing": 0, "missed": 0,
                          "errors": 0, "categories": defaultdict(int), "examples": []})
for r in rows:
    s = by[r["setup"]]
    if r["setup"] not in order: order.append(r["setup"])
    if "error" in r:
        s["errors"] += 1
        continue
    s["programs"] += 1
    s["compared"] += r["compared"]
    s["agreeing"] += r["agreeing"]
    s["missed"] += r.get("missed", 0)
    s["perfect"] += r["compared"] == r["agreeing"]
    for k, v in r["categories"].items():
        s["categories"][k] += v
    if r["compared"] != r["agreeing"] and len(s["examples"]) < 2:
        s["examples"].append((r["seed"], r["disagreements"][:1]))
print(f"| setup | programs | at 100% | instructions agreeing | not analysed | errors |")
print(f"| --- | ---: | ---: | ---: | ---: | ---: |")
total_c = total_a = 0
for k in order:
    s = by[k]
    total_c += s["compared"]; total_a += s["agreeing"]
    pct = 100.0 * s["agreeing"] / s["compared"] if s["compared"] else 100.0
    print(f"| {k} | {s['programs']} | {s['perfect']} | {s['agreeing']:,} / {s['compared']:,} ({pct:.3f}%) | {s['missed']:,} | {s['errors']} |")
print()
print(f"all setups: {total_a:,} / {total_c:,} instructions agree"
      + (f" ({100.0 * total_a / total_c:.4f}%)" if total_c else ""))
for k in order:
    s = by[k]
    if s["categories"]:
        print(f"{k}: disagreements by category: {dict(s['categories'])}; examples: {s['examples']}")
ok = all(by[k]["perfect"] == by[k]["programs"] and not by[k]["errors"] for k in order)
sys.exit(0 if ok else 1)
PY
