#!/usr/bin/env bash
# The paper's validation experiment: csmith programs compiled by gcc and clang at -O0
# -fomit-frame-pointer, -O1, -O2, -O3 and -Os, each run under `ehelf check --only PROGRAM` (the
# compiler's own tables; libc is tested in tests/unit/test_check.cpp). Programs that fail or run
# longer than 2 s natively are skipped; checks stop after 5,000,000 instructions. Every program
# with an inconsistency is kept in OUT/failures/ with its source, binary, report and the command
# that reproduces it; a summary by compiler, setup and column ends the run (OUT/summary.txt).
# Usage: scripts/check-campaign.sh N [OUT] [FIRST_SEED]     (scripts/setup.sh installs csmith)
set -uo pipefail
count=${1:?number of programs}
out=${2:-check-campaign}
seed=${3:-1}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ehelf="$repo/build/bin/ehelf"
[ -x "$ehelf" ] || { echo "build ehelf first (build/bin/ehelf)" >&2; exit 2; }
command -v csmith > /dev/null || { echo "csmith is missing: bash scripts/setup.sh" >&2; exit 2; }
mkdir -p "$out/failures"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
setups=("gcc -O0 -fomit-frame-pointer" "gcc -O1" "gcc -O2" "gcc -O3" "gcc -Os"
        "clang -O0 -fomit-frame-pointer" "clang -O1" "clang -O2" "clang -O3" "clang -Os")
results="$out/results.tsv" # seed, setup, status, checked, inconsistencies, columns
: > "$results"
for ((i = 0; i < count; i++, seed++)); do
  src="$work/p$seed.c"
  # csmith writes platform.info where it runs: in the scratch directory.
  (cd "$work" && csmith --seed "$seed" > "$src" 2> /dev/null) || continue
  for setup in "${setups[@]}"; do
    bin="$work/p$seed"
    # shellcheck disable=SC2086
    if ! $setup -w -I/usr/include/csmith "$src" -o "$bin" 2> /dev/null; then
      printf '%s\t%s\tcompile-error\t0\t0\t\n' "$seed" "$setup" >> "$results"
      continue
    fi
    if ! timeout 2 "$bin" > /dev/null 2>&1; then
      printf '%s\t%s\tskipped-native\t0\t0\t\n' "$seed" "$setup" >> "$results"
      continue
    fi
    "$ehelf" check --json --only "$(basename "$bin")" --max-steps 5000000 -- "$bin" \
      > "$work/report.json" 2> "$work/err"
    rc=$?
    line=$(python3 - "$work/report.json" "$rc" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
try:
    d = json.loads(text[text.index("{\n"):])
except ValueError:
    print("tracing-error\t0\t0\t")
    sys.exit()
s = d["summary"]
status = "step-limit" if s["step_limit"] else ("inconsistent" if d["inconsistencies"] else "ok")
cols = ",".join(sorted({i["column"] for i in d["inconsistencies"]}))
print("%s\t%d\t%d\t%s" % (status, s["checked"], len(d["inconsistencies"]), cols))
PY
)
    printf '%s\t%s\t%s\n' "$seed" "$setup" "$line" >> "$results"
    if [ "${line%%$'\t'*}" = inconsistent ]; then
      keep="$out/failures/$seed-${setup// /_}"
      mkdir -p "$keep"
      cp "$src" "$keep/program.c"
      cp "$bin" "$keep/program"
      "$ehelf" check --only program -- "$keep/program" > "$keep/report.txt" 2>&1
      echo "$setup -w -I/usr/include/csmith program.c -o program && ehelf check --only program -- ./program" \
        > "$keep/reproduce.sh"
    fi
  done
done
python3 - "$results" <<'PY' | tee "$out/summary.txt"
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(collections.Counter)
checked = collections.Counter()
columns = collections.defaultdict(collections.Counter)
for seed, setup, status, n, incons, cols in rows:
    by[setup][status] += 1
    checked[setup] += int(n)
    for c in filter(None, cols.split(",")):
        columns[setup][c] += 1
print("| setup | programs checked | inconsistent | skipped (native run failed or took > 2 s) | step limit | instructions checked | columns |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for setup in sorted(by):
    c = by[setup]
    print("| %s | %d | %d | %d | %d | %d | %s |" % (setup, c["ok"] + c["inconsistent"], c["inconsistent"],
          c["skipped-native"], c["step-limit"], checked[setup],
          ", ".join("%s %d" % kv for kv in sorted(columns[setup].items())) or "-"))
PY
