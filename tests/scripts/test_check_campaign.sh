#!/usr/bin/env bash
# A sample of scripts/check-campaign.sh (the paper's csmith experiment; the full run is in
# docs/design/validator.md): one csmith program, two setups, no reduction: every build checked or
# skipped with a reason, the summary's table has a row per setup and the instructions checked add up.
source "$(dirname "$0")/common.sh" "$@"
src="$(cd "$2" && pwd)"
if ! command -v csmith > /dev/null; then
  echo "SKIP: csmith is not installed (bash scripts/setup.sh installs it)"
  exit 77
fi
EHELF="$ehelf" SETUPS="gcc -O2;clang -Os" REDUCE=0 bash "$src/scripts/check-campaign.sh" 1 "$work/c" 3 \
  > "$work/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l < "$work/c/results/3.tsv")" -eq 2 ] &&
    grep -q "^| gcc -O2 | " "$work/c/summary.md" && grep -q "^| clang -Os | " "$work/c/summary.md" &&
    python3 - "$work/c" <<'PY'
import sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(out + "/results/3.tsv")]
assert {r[1] for r in rows} == {"gcc -O2", "clang -Os"}, rows
assert all(r[2] in ("ok", "inconsistent", "step-limit", "skipped-native") for r in rows), rows
total = sum(int(r[3]) for r in rows)
head = open(out + "/summary.md").readline()
assert "1 csmith programs" in head and format(total, ",") + " instructions checked" in head, head
assert any(r[2] == "ok" and int(r[3]) > 1000 for r in rows), rows
PY
then
  ok "campaign sample: $(head -1 "$work/c/summary.md")"
else
  bad "campaign sample: rc=$rc"; cat "$work/out"
fi
exit $fail
