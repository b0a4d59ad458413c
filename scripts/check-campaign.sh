#!/usr/bin/env bash
# The paper's validation experiment: csmith programs compiled by gcc and clang at -O0
# -fomit-frame-pointer, -O1, -O2, -O3 and -Os, each run under `ehelf check --only PROGRAM` (the
# compiler's own tables; libc is tested in tests/unit/test_check.cpp). Programs that fail or run
# longer than 2 s natively are skipped; checks stop after 5,000,000 instructions. Every build
# with an inconsistency is kept in OUT/failures/ with its source, binary, report and the command
# that reproduces it; then one build per (compiler, kind of inconsistency) is reduced with cvise
# while the same inconsistency persists (same column, same instruction mnemonic, same place in
# its function: entry or body), into OUT/failures/*/reduced.c. OUT/summary.md ends the run:
# programs, setups, instructions checked, inconsistencies by compiler and kind.
#
# Usage: scripts/check-campaign.sh N [OUT] [FIRST_SEED]     (scripts/setup.sh installs csmith, cvise)
#        scripts/check-campaign.sh --reduce OUT              (reduction and summary of a run)
# Environment: JOBS (programs checked at once, default 1), REDUCE (0: no reduction; default 1),
# REDUCE_SECONDS (cvise's time per failure, default 900), EHELF (the ehelf binary, default
# build/bin/ehelf), SETUPS (instead of the ten: "gcc -O2;clang -Os"). Run it under `nice` on a
# shared machine. A failure directory holds program.c, program, setup, report.{txt,json},
# kinds, reproduce.sh, and after the reduction interesting.sh, cvise.log and reduced.c.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ehelf=${EHELF:-$repo/build/bin/ehelf}
setups=("gcc -O0 -fomit-frame-pointer" "gcc -O1" "gcc -O2" "gcc -O3" "gcc -Os"
        "clang -O0 -fomit-frame-pointer" "clang -O1" "clang -O2" "clang -O3" "clang -Os")
if [ -n "${SETUPS:-}" ]; then # a sample: setups separated by ';'
  IFS=';' read -ra setups <<< "$SETUPS"
fi

# The kinds of a report's inconsistencies, one per line: "column:mnemonic:entry|body" (the
# column, the instruction's mnemonic, at the function's first instruction or not).
kinds() { # REPORT.json
  python3 - "$1" <<'PY'
import json, sys
try:
    text = open(sys.argv[1]).read()
    d = json.loads(text[text.index("{\n"):])
except (OSError, ValueError):
    sys.exit()
for k in sorted({"%s:%s:%s" % (i["column"], (i["instruction"].split() or ["?"])[0],
                               "body" if "+" in i["function"] else "entry")
                 for i in d["inconsistencies"]}):
    print(k)
PY
}

# One program: every setup, a line each in OUT/results/SEED.tsv (seed, setup, status,
# instructions checked, inconsistencies, kinds).
check_seed() { # SEED OUT
  local seed=$1 out=$2 work
  work=$(mktemp -d)
  local src="$work/p$seed.c" bin="$work/p$seed" results="$out/results/$seed.tsv"
  : > "$results.part"
  # csmith writes platform.info where it runs: in the scratch directory.
  if ! (cd "$work" && csmith --seed "$seed" > "$src" 2> /dev/null); then
    rm -rf "$work"
    return
  fi
  for setup in "${setups[@]}"; do
    # shellcheck disable=SC2086
    if ! $setup -w -I/usr/include/csmith "$src" -o "$bin" 2> /dev/null; then
      printf '%s\t%s\tcompile-error\t0\t0\t\n' "$seed" "$setup" >> "$results.part"
      continue
    fi
    if ! timeout 2 "$bin" > /dev/null 2>&1; then
      printf '%s\t%s\tskipped-native\t0\t0\t\n' "$seed" "$setup" >> "$results.part"
      continue
    fi
    timeout 600 "$ehelf" check --json --only "$(basename "$bin")" --max-steps 5000000 -- "$bin" \
      > "$work/report.json" 2> "$work/err"
    local line
    line=$(python3 - "$work/report.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
try:
    d = json.loads(text[text.index("{\n"):])
except ValueError:
    print("tracing-error\t0\t0")
    sys.exit()
s = d["summary"]
status = "inconsistent" if d["inconsistencies"] else ("step-limit" if s["step_limit"] else "ok")
print("%s\t%d\t%d" % (status, s["checked"], len(d["inconsistencies"])))
PY
)
    local found
    found=$(kinds "$work/report.json" | paste -sd, -)
    printf '%s\t%s\t%s\t%s\n' "$seed" "$setup" "$line" "$found" >> "$results.part"
    if [ "${line%%$'\t'*}" = inconsistent ]; then
      local keep="$out/failures/$seed-${setup// /_}"
      mkdir -p "$keep"
      cp "$src" "$keep/program.c"
      cp "$bin" "$keep/program"
      cp "$work/report.json" "$keep/report.json"
      "$ehelf" check --only program -- "$keep/program" > "$keep/report.txt" 2>&1
      echo "$setup" > "$keep/setup"
      kinds "$work/report.json" > "$keep/kinds"
      printf '#!/bin/sh\n%s -w -I/usr/include/csmith program.c -o program && ehelf check --only program -- ./program\n' \
        "$setup" > "$keep/reproduce.sh"
      chmod +x "$keep/reproduce.sh"
    fi
  done
  mv "$results.part" "$results"
  rm -rf "$work"
}

# cvise's interestingness test for one failure: the candidate compiles with the failure's setup,
# runs natively within 2 s, and ehelf check still reports the kind.
write_interestingness() { # FAILURE_DIR KIND
  local dir=$1 kind=$2
  cat > "$dir/interesting.sh" <<EOF
#!/usr/bin/env bash
# cvise test (check-campaign.sh): compiles, runs natively, and still shows $kind.
$(cat "$dir/setup") -w -I/usr/include/csmith program.c -o program 2> /dev/null || exit 1
timeout 2 ./program > /dev/null 2>&1 || exit 1
timeout 120 "$ehelf" check --json --only program --max-steps 5000000 -- ./program > report.json 2> /dev/null
source "$repo/scripts/check-campaign.sh" --functions
kinds report.json | grep -xF '$kind' > /dev/null
EOF
  chmod +x "$dir/interesting.sh"
}

reduce_failures() { # OUT
  local out=$1 seen="" dir kind compiler
  command -v cvise > /dev/null || { echo "cvise is missing: bash scripts/setup.sh" >&2; return; }
  for dir in "$out"/failures/*/; do
    [ -f "$dir/kinds" ] || continue
    compiler=$(cut -d' ' -f1 "$dir/setup")
    kind=$(head -1 "$dir/kinds")
    case " $seen " in *" $compiler/$kind "*) continue ;; esac
    seen="$seen $compiler/$kind"
    [ -f "$dir/reduced.c" ] && continue
    write_interestingness "$dir" "$kind"
    local scratch
    scratch=$(mktemp -d)
    cp "$dir/program.c" "$scratch/program.c"
    cp "$dir/interesting.sh" "$scratch/"
    echo "reducing $dir ($compiler, $kind)"
    (cd "$scratch" && timeout "${REDUCE_SECONDS:-900}" cvise --n 1 --timeout 180 \
      ./interesting.sh program.c > "$dir/cvise.log" 2>&1)
    # cvise reduces in place: what is left is the smallest program it found interesting.
    if (cd "$scratch" && ./interesting.sh); then
      cp "$scratch/program.c" "$dir/reduced.c"
      echo "$kind" > "$dir/reduced.kind"
    fi
    rm -rf "$scratch"
  done
}

summary() { # OUT
  python3 - "$1" <<'PY'
import collections, glob, os, sys
out = sys.argv[1]
rows = []
for f in glob.glob(os.path.join(out, "results", "*.tsv")):
    rows += [l.rstrip("\n").split("\t") for l in open(f) if l.strip()]
by = collections.defaultdict(collections.Counter)
checked = collections.Counter()
kinds = collections.defaultdict(collections.Counter)  # (compiler, kind) -> builds by setup
for seed, setup, status, n, incons, found in rows:
    by[setup][status] += 1
    checked[setup] += int(n)
    for k in filter(None, found.split(",")):
        kinds[(setup.split()[0], k)][setup] += 1
seeds = {r[0] for r in rows}
total = sum(checked.values())
print("%d csmith programs (seeds %s-%s), %d setups, %d builds checked, %s instructions checked\n"
      % (len(seeds), min(seeds, key=int) if seeds else "-", max(seeds, key=int) if seeds else "-",
         len(by), sum(c["ok"] + c["inconsistent"] + c["step-limit"] for c in by.values()),
         format(total, ",")))
print("| setup | builds checked | inconsistent | step limit (5M) | skipped (native run failed or > 2 s) | compile errors | tracing errors | instructions checked |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for setup in sorted(by):
    c = by[setup]
    print("| %s | %d | %d | %d | %d | %d | %d | %s |" % (
        setup, c["ok"] + c["inconsistent"] + c["step-limit"], c["inconsistent"], c["step-limit"],
        c["skipped-native"], c["compile-error"], c["tracing-error"], format(checked[setup], ",")))
print()
if not kinds:
    print("No inconsistency in any build.")
else:
    reduced = {}
    for d in glob.glob(os.path.join(out, "failures", "*")):
        if os.path.exists(os.path.join(d, "reduced.c")):
            compiler = open(os.path.join(d, "setup")).read().split()[0]
            kind = open(os.path.join(d, "reduced.kind")).read().strip()
            lines = sum(1 for _ in open(os.path.join(d, "reduced.c")))
            reduced[(compiler, kind)] = "%s (%d lines)" % (os.path.relpath(d, out), lines)
    print("| compiler | kind (column:instruction:place) | builds | setups | reduced test case |")
    print("| --- | --- | --- | --- | --- |")
    for (compiler, kind), setups in sorted(kinds.items()):
        print("| %s | %s | %d | %s | %s |" % (compiler, kind, sum(setups.values()),
              ", ".join("%s %d" % (s.split(None, 1)[1], n) for s, n in sorted(setups.items())),
              reduced.get((compiler, kind), "-")))
PY
}

# Sourced by the interestingness tests for kinds().
[ "${1:-}" = --functions ] && return 0
# One program, run by the parallel driver below.
if [ "${1:-}" = --seed ]; then
  check_seed "$2" "$3"
  exit 0
fi
if [ "${1:-}" = --reduce ]; then
  reduce_failures "${2:?OUT}"
  summary "$2" | tee "$2/summary.md"
  exit 0
fi

count=${1:?number of programs}
out=${2:-check-campaign}
first=${3:-1}
[ -x "$ehelf" ] || { echo "build ehelf first ($ehelf)" >&2; exit 2; }
command -v csmith > /dev/null || { echo "csmith is missing: bash scripts/setup.sh" >&2; exit 2; }
mkdir -p "$out/failures" "$out/results"
out=$(cd "$out" && pwd)
export EHELF="$ehelf"
# Seeds already done (a results file each) are not run again: an interrupted campaign resumes.
seq "$first" $((first + count - 1)) | while read -r s; do
  [ -f "$out/results/$s.tsv" ] || echo "$s"
done | xargs -P "${JOBS:-1}" -I{} bash "$repo/scripts/check-campaign.sh" --seed {} "$out"
[ "${REDUCE:-1}" = 0 ] || reduce_failures "$out"
summary "$out" | tee "$out/summary.md"
